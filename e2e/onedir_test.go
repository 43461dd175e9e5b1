package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
)

// dirModes are the modes a server runs in, each with its own etcd-prefix
// on e: single-server, cluster mode over etcd, and Redis Cluster over
// etcd.
func dirModes(e *testetcd.Server) []dirMode {
	etcd := func(prefix string, args ...string) []string {
		return append([]string{"--etcd-endpoints", e.Endpoint, "--etcd-prefix", prefix}, args...)
	}
	return []dirMode{
		{"single", "", nil},
		{"etcd", "/onedir-etcd/", etcd("/onedir-etcd/")},
		{"cluster-enabled", "/onedir-cluster/", etcd("/onedir-cluster/", "--cluster-enabled", "yes")},
	}
}

// A dirMode is a mode of dirModes: its name, etcd-prefix ("" for none)
// and arguments.
type dirMode struct {
	name, prefix string
	args         []string
}

// start starts a server of mode m on dir, and waits until it holds a
// server-id where it needs one.
func (m dirMode) start(t *testing.T, dir string) *process {
	t.Helper()
	p := start(t, nil, append(m.args, "--dir", dir)...)
	if m.prefix != "" {
		waitHolding(t, p, 30*time.Second)
	}
	return p
}

// TestOneServerPerDir: in every mode, a second server on a live one's
// dir, even with a state-file of its own, refuses to start with one line
// naming the dir and the live one's pid, before it reads, claims or
// writes anything: the dir (the live one paused beside it, so that it
// writes nothing either) is as it was, file for file, and so is etcd (its
// revision: no claim, no write). The live one then goes on serving.
func TestOneServerPerDir(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	for _, mode := range dirModes(e) {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			a := mode.start(t, dir)
			first := firstIncr(t, a)
			_, port, _ := strings.Cut(a.Addr, ":")
			seconds := [][]string{{"--state-file", "other.state", "--server-id", "1"}, {"--port", port}}
			a.Pause(t)
			files, rev := dirFiles(t, dir), etcdRevision(t, cli, mode.prefix)
			for _, args := range seconds {
				out, code := runToExit(t, append(append([]string{"--dir", dir}, mode.args...), args...)...)
				lines := strings.Split(strings.TrimSpace(out), "\n")
				for _, w := range []string{"dir " + dir + " is in use by another idserver (pid " + strconv.Itoa(a.Cmd.Process.Pid) + ")", "a directory of its own"} {
					if code == 0 || len(lines) != 1 || !strings.Contains(lines[0], w) {
						t.Fatalf("second server %v: exit %d, output %q; want exit != 0 and one line with %q", args, code, out, w)
					}
				}
				if now := dirFiles(t, dir); !maps.EqualFunc(now, files, fileInfo.same) {
					t.Fatalf("second server %v changed the dir:\nbefore %v\nafter  %v", args, files, now)
				}
				if now := etcdRevision(t, cli, mode.prefix); now != rev {
					t.Fatalf("second server %v wrote to etcd: revision %d, before %d", args, now, rev)
				}
			}
			a.Cmd.Process.Signal(syscall.SIGCONT)
			c := redis.NewClient(&redis.Options{Addr: a.Addr})
			defer c.Close()
			if n, err := c.Incr(context.Background(), "orders").Result(); err != nil || n != first+1 {
				t.Fatalf("the live server after the second's refusal: INCR orders %d, %v; want %d", n, err, first+1)
			}
			checkAbove(t, mgetid(t, a.Addr, 100), 0)
		})
	}
}

// TestFailedStartLeavesDir: in every mode, a start on a port in use
// stops with one line naming the address and the process that listens
// there, and leaves the dir as it found it: empty stays empty, and a dir
// a server stopped in keeps its files, byte for byte, inode for inode,
// with no lock file left; and nothing is written to etcd.
func TestFailedStartLeavesDir(t *testing.T) {
	e := testetcd.Start(t)
	cli := e.Client()
	defer cli.Close()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, port, _ := strings.Cut(taken.Addr().String(), ":")
	for _, mode := range dirModes(e) {
		t.Run(mode.name, func(t *testing.T) {
			used := t.TempDir()
			a := mode.start(t, used)
			firstIncr(t, a)
			if code := a.Stop(); code != 0 {
				t.Fatalf("exit %d after SIGTERM", code)
			}
			for _, dir := range []string{t.TempDir(), used} {
				files, rev := dirFiles(t, dir), etcdRevision(t, cli, mode.prefix)
				out, code := runToExit(t, append(append([]string{"--dir", dir}, mode.args...), "--port", port)...)
				lines := strings.Split(strings.TrimSpace(out), "\n")
				for _, w := range []string{"127.0.0.1:" + port, "address already in use", fmt.Sprintf("pid %d (", os.Getpid())} {
					if code == 0 || len(lines) != 1 || !strings.Contains(lines[0], w) {
						t.Fatalf("start on a port in use: exit %d, output %q; want exit != 0 and one line with %q", code, out, w)
					}
				}
				if now := dirFiles(t, dir); !maps.EqualFunc(now, files, fileInfo.same) {
					t.Fatalf("a failed start changed the dir:\nbefore %v\nafter  %v", files, now)
				}
				if now := etcdRevision(t, cli, mode.prefix); now != rev {
					t.Fatalf("a failed start wrote to etcd: revision %d, before %d", now, rev)
				}
			}
		})
	}
}

// firstIncr makes the key orders on p and returns its value, so that its sequences' files are
// in its dir too, once p serves it (in a cluster, once p owns its slot).
func firstIncr(t *testing.T, p *process) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer c.Close()
	var n int64
	var err error
	if !await.Within(30*time.Second, func() bool {
		n, err = c.Incr(context.Background(), "orders").Result()
		return err == nil
	}) {
		t.Fatalf("INCR orders: %v", err)
	}
	return n
}

// fileInfo is what a test compares of a file: its inode, time of last
// change and bytes.
type fileInfo struct {
	ino   uint64
	mtime time.Time
	data  []byte
}

func (a fileInfo) same(b fileInfo) bool {
	return a.ino == b.ino && a.mtime.Equal(b.mtime) && bytes.Equal(a.data, b.data)
}

func (a fileInfo) String() string {
	return fmt.Sprintf("{ino %d, %s, %d bytes}", a.ino, a.mtime.Format(time.RFC3339Nano), len(a.data))
}

// dirFiles is every file in dir, by its path under it.
func dirFiles(t *testing.T, dir string) map[string]fileInfo {
	t.Helper()
	files := map[string]fileInfo{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		files[strings.TrimPrefix(path, dir)] = fileInfo{st.Sys().(*syscall.Stat_t).Ino, st.ModTime(), data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// etcdRevision is etcd's revision, which every write raises, and fails
// the test when there is no key under prefix (a server of it holds
// nothing); 0 when prefix is "" (single-server mode).
func etcdRevision(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	if prefix == "" {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count == 0 {
		t.Fatalf("etcd: %d keys under %s, %v", resp.Count, prefix, err)
	}
	return resp.Header.Revision
}
