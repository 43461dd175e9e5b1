package netns

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// dial connects from namespace name to addr and sends a line (bash's
// /dev/tcp), within 2 s; it reports whether the line arrived at ln.
func dial(t *testing.T, n *Network, name string, ln net.Listener) bool {
	t.Helper()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	script := fmt.Sprintf("exec 3<>/dev/tcp/%s/%s && echo from-%s >&3", host, port, name)
	cmd := exec.Command("timeout", append([]string{"2"}, append(n.Prefix(name), "bash", "-c", script)...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- ""
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		got <- line
	}()
	err := cmd.Wait()
	if err != nil {
		ln.(*net.TCPListener).SetDeadline(time.Now()) // no connection is coming
	}
	line := <-got
	ln.(*net.TCPListener).SetDeadline(time.Time{})
	return err == nil && line == "from-"+name+"\n"
}

// names is every name ip lists of namespaces and links.
func names(t *testing.T) string {
	t.Helper()
	spaces, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(spaces) + string(links)
}

// TestCutAndHeal: a namespace reaches the test process at Host until
// Cut in it or in the root namespace, and again after Heal; the
// network is gone when the test ends.
func TestCutAndHeal(t *testing.T) {
	canMake(t) // before the subtest: what it leaves is checked here
	var base, cut string
	t.Run("network", func(t *testing.T) {
		n := New(t, "a", "b")
		base, cut = n.base, n.Addr("a")
		ln, err := net.Listen("tcp", n.Host+":0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		for _, c := range []struct {
			what      string
			do        func()
			a, b, all bool
		}{
			{"at first", func() {}, true, true, true},
			{"a cut from the host in a", func() { n.Cut("a", n.Host) }, false, true, false},
			{"healed", func() { n.Heal("a", n.Host) }, true, true, true},
			{"b cut in the root namespace", func() { n.Cut("", n.Addr("b")) }, true, false, false},
			{"healed in the root namespace", func() { n.Heal("", n.Addr("b")) }, true, true, true},
			{"a split from the root namespace", func() { n.Split("a", "") }, false, true, false},
			{"a joined again", func() { n.Join("a", "") }, true, true, true},
		} {
			c.do()
			if a, b := dial(t, n, "a", ln), dial(t, n, "b", ln); a != c.a || b != c.b {
				t.Errorf("%s: a reaches the host %v, b %v; want %v, %v", c.what, a, b, c.a, c.b)
			}
		}
		// Split cuts the root namespace's way too: a's address takes no
		// connection (nothing listens at port 1 in a: refused once joined).
		n.Split("a", "")
		if _, err := net.DialTimeout("tcp", n.Addr("a")+":1", time.Second); err == nil || !strings.Contains(err.Error(), "invalid argument") {
			t.Errorf("a dial of a, split from the root namespace: %v, want the blackhole's invalid argument", err)
		}
		n.Join("a", "")
		if _, err := net.DialTimeout("tcp", n.Addr("a")+":1", time.Second); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("a dial of a, joined again: %v, want connection refused", err)
		}
		n.Cut("", cut) // left for the cleanup
		if !strings.Contains(names(t), base+"-a") {
			t.Fatalf("no namespace %s-a:\n%s", base, names(t))
		}
	})
	if left := names(t); strings.Contains(left, base) {
		t.Errorf("after the test, %s is left:\n%s", base, left)
	}
	if out, _ := exec.Command("ip", "route", "show", "type", "blackhole").Output(); strings.Contains(string(out), cut+" ") {
		t.Errorf("after the test, the blackhole of %s is left: %s", cut, out)
	}
}

// TestSweep: New removes the namespace, bridge and root blackhole a run
// that crashed left (its subnet's lock free), and kills the processes
// left in the namespace, and not a live network's.
func TestSweep(t *testing.T) {
	live := New(t, "x")
	live.Cut("", live.Addr("x"))
	subnet := live.subnet%250 + 1 // no live run's, unless another test's
	dead, deadAddr := fmt.Sprintf("idn%d-dead", subnet), fmt.Sprintf("10.213.%d.11", subnet)
	for _, args := range [][]string{{"netns", "add", dead + "-x"}, {"link", "add", dead, "type", "bridge"}, {"route", "add", "blackhole", deadAddr + "/32"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	orphan := exec.Command("ip", "netns", "exec", dead+"-x", "sleep", "600") // a dead run's server
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orphan.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()
	New(t, "y")
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Errorf("a process in a dead run's namespace still runs 10 s after the sweep")
	}
	left := names(t)
	if strings.Contains(left, dead) {
		t.Errorf("a dead run's namespace or bridge is left:\n%s", left)
	}
	if !strings.Contains(left, live.Name("x")) || !strings.Contains(left, live.base+"v0") {
		t.Errorf("the live network's namespace or veth is gone:\n%s", left)
	}
	out, _ := exec.Command("ip", "route", "show", "type", "blackhole").Output()
	if strings.Contains(string(out), deadAddr+" ") || !strings.Contains(string(out), live.Addr("x")) {
		t.Errorf("blackholes after the sweep: %s; want the live one (%s) only", out, live.Addr("x"))
	}
}
