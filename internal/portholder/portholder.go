// Package portholder names the process that listens on an address a
// server could not bind, for the one line a failed start prints.
package portholder

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"syscall"

	"github.com/prometheus/procfs"
)

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = 0x0A

// Explain adds to err, when it says that the address is in use, which
// process listens there: "pid N (command)", found through /proc (best
// effort: Linux only, and only a process this one may look into).
func Explain(err error) error {
	var op *net.OpError
	if !errors.Is(err, syscall.EADDRINUSE) || !errors.As(err, &op) {
		return err
	}
	a, ok := op.Addr.(*net.TCPAddr)
	if !ok {
		return err
	}
	if who := portHolder(a); who != "" {
		return fmt.Errorf("%w: %s listens there", err, who)
	}
	return err
}

// portHolder is the process with a socket listening where a would, or ""
// if none can be found: the sockets that listen on a's port, and on a's
// address or every address, by their inode; then the process with a
// descriptor of one of them. (procfs's reading of /proc/net/tcp is
// marked deprecated for netlink's sock_diag, which this does not need.)
func portHolder(a *net.TCPAddr) string {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return ""
	}
	sockets := map[string]bool{}
	for _, table := range []func() (procfs.NetTCP, error){fs.NetTCP, fs.NetTCP6} {
		lines, _ := table()
		for _, l := range lines {
			if l.St == tcpListen && l.LocalPort == uint64(a.Port) &&
				(a.IP.IsUnspecified() || l.LocalAddr.IsUnspecified() || l.LocalAddr.Equal(a.IP)) {
				sockets["socket:["+strconv.FormatUint(l.Inode, 10)+"]"] = true
			}
		}
	}
	if len(sockets) == 0 {
		return ""
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return ""
	}
	for _, p := range procs {
		fds, err := p.FileDescriptorTargets()
		if err == nil && slices.ContainsFunc(fds, func(fd string) bool { return sockets[fd] }) {
			comm, _ := p.Comm()
			return fmt.Sprintf("pid %d (%s)", p.PID, comm)
		}
	}
	return ""
}
