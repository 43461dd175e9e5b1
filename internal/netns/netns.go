// Package netns makes a private network of Linux network namespaces for a
// test, with iproute2 as root: a bridge in the root namespace, where the
// test process itself has an address, and one namespace per name, each
// with a veth on the bridge and its own address of 10.213.<subnet>.0/24
// and its loopback up. A process run in a namespace (Prefix) serves and
// dials on that address only, so a partition is a route: Cut adds a
// blackhole route to an address inside one namespace (its packets to it
// are dropped: established connections hang as on a real cut, though a
// new connection fails at once, EINVAL, where a real cut makes it wait),
// Heal removes it; Split cuts two namespaces both ways. Neither netem nor iptables is needed (this machine has
// neither).
//
// Each network takes a subnet number locked for its life (a file lock,
// so concurrent tests and packages never share one) and names its links
// and namespaces idn<subnet>-<random>: a run that crashed leaves them
// behind, and the next New removes every leftover whose subnet no live
// run holds before it makes its own. t.Cleanup removes the network.
package netns

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// prefix begins the name of every link and namespace this package makes.
const prefix = "idn"

// Network is a private network of namespaces for one test.
type Network struct {
	t      testing.TB
	subnet int    // the third byte of the network's addresses
	base   string // every name of this network begins with it
	lock   *os.File
	hosts  map[string]int // each namespace's last address byte, by name
	// Host is the root namespace's address on the bridge, where the test
	// process's connections to the namespaces come from.
	Host string

	mu   sync.Mutex
	cuts map[string]bool // blackholes of the root namespace, by address
}

// New makes a network with a namespace for each of names and removes it
// when t ends. It skips t, saying why, where namespaces cannot be made
// (not root, no ip command), or fails it there under CI=true: CI runs as
// root with iproute2, so the test must not silently skip there.
func New(t testing.TB, names ...string) *Network {
	t.Helper()
	canMake(t)
	sweep(t)
	n := &Network{t: t, hosts: map[string]int{}, cuts: map[string]bool{}}
	n.subnet, n.lock = takeSubnet(t)
	n.base = fmt.Sprintf("%s%d-%04x", prefix, n.subnet, rand.IntN(1<<16))
	n.Host = n.addr(1)
	t.Cleanup(n.remove)
	bridge := n.base
	n.ip("link", "add", bridge, "type", "bridge")
	n.ip("addr", "add", n.Host+"/24", "dev", bridge)
	n.ip("link", "set", bridge, "up")
	for i, name := range names {
		ns, veth := n.Name(name), n.veth(i)
		n.hosts[name] = 10 + i
		n.ip("netns", "add", ns)
		n.ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
		n.ip("link", "set", veth, "master", bridge, "up")
		n.ip("-n", ns, "addr", "add", n.Addr(name)+"/24", "dev", "eth0")
		n.ip("-n", ns, "link", "set", "eth0", "up")
		n.ip("-n", ns, "link", "set", "lo", "up")
	}
	return n
}

// canMake skips t (fails it under CI=true) unless this process can make
// namespaces: root, with iproute2.
func canMake(t testing.TB) {
	t.Helper()
	why := ""
	if _, err := exec.LookPath("ip"); err != nil {
		why = "no ip command (apt install iproute2)"
	} else if os.Geteuid() != 0 {
		why = "not root (ip netns add needs CAP_SYS_ADMIN; sudo go test, or CI, which runs as root)"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("NETWORK NAMESPACES CANNOT BE MADE: %s; CI runs as root with iproute2 and must run this test", why)
	}
	t.Skipf("SKIPPED, NOT RUN: network namespaces cannot be made here: %s; CI (as root) runs it", why)
}

// Name is the full name of the namespace name, for ip netns.
func (n *Network) Name(name string) string { return n.base + "-" + name }

// Addr is the address of the namespace name.
func (n *Network) Addr(name string) string {
	host, ok := n.hosts[name]
	if !ok {
		n.t.Fatalf("netns: no namespace %q in this network", name)
	}
	return n.addr(host)
}

// veth is the root namespace's end of the veth of the i-th namespace.
func (n *Network) veth(i int) string { return fmt.Sprintf("%sv%d", n.base, i) }

func (n *Network) addr(host int) string { return fmt.Sprintf("10.213.%d.%d", n.subnet, host) }

// Prefix is the command line that runs a command in the namespace name
// (ip netns exec, which execs the command: its pid is the command's).
func (n *Network) Prefix(name string) []string {
	return []string{"ip", "netns", "exec", n.Name(name)}
}

// Cut drops the packets that namespace name sends to addr, "" naming the
// root namespace (the test process's), until Heal.
func (n *Network) Cut(name, addr string) { n.route(name, "add", addr) }

// Heal removes the Cut of name to addr.
func (n *Network) Heal(name, addr string) { n.route(name, "del", addr) }

// Split cuts namespaces a and b from each other, both ways, until Join;
// "" names the root namespace. A cut of one way only is not a partition:
// the packets of the other way still arrive (a stream's writes included).
func (n *Network) Split(a, b string) {
	n.Cut(a, n.addrOf(b))
	n.Cut(b, n.addrOf(a))
}

// Join removes the Split of a and b.
func (n *Network) Join(a, b string) {
	n.Heal(a, n.addrOf(b))
	n.Heal(b, n.addrOf(a))
}

// addrOf is the address of namespace name, Host for "".
func (n *Network) addrOf(name string) string {
	if name == "" {
		return n.Host
	}
	return n.Addr(name)
}

func (n *Network) route(name, op, addr string) {
	n.t.Helper()
	args := []string{"route", op, "blackhole", addr + "/32"}
	if name != "" {
		args = append([]string{"-n", n.Name(name)}, args...)
	} else {
		n.mu.Lock()
		n.cuts[addr] = op == "add"
		n.mu.Unlock()
	}
	n.ip(args...)
}

// ip runs ip with args and fails the test if it fails.
func (n *Network) ip(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// remove deletes the network: its namespaces, bridge and cuts of the
// root namespace, each whatever the others did.
func (n *Network) remove() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for name, host := range n.hosts {
		// A namespace's links go only once the kernel has cleaned it up,
		// in the background: the veth is deleted here and now.
		exec.Command("ip", "link", "del", n.veth(host-10)).Run()
		exec.Command("ip", "netns", "del", n.Name(name)).Run()
	}
	exec.Command("ip", "link", "del", n.base).Run()
	for addr, cut := range n.cuts {
		if cut {
			exec.Command("ip", "route", "del", "blackhole", addr+"/32").Run()
		}
	}
	n.lock.Close()
}

// lockSubnet takes the lock of subnet without waiting: nil if a live run
// holds it.
func lockSubnet(t testing.TB, subnet int) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "idserver-netns-"+strconv.Itoa(subnet)+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return nil
	}
	return f
}

// takeSubnet locks a subnet no live run holds and no address of the root
// namespace is in.
func takeSubnet(t testing.TB) (int, *os.File) {
	t.Helper()
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		t.Fatalf("ip addr show: %v", err)
	}
	first := rand.IntN(250)
	for i := range 250 {
		subnet := 1 + (first+i)%250
		if strings.Contains(string(out), fmt.Sprintf(" 10.213.%d.", subnet)) {
			continue
		}
		if lock := lockSubnet(t, subnet); lock != nil {
			return subnet, lock
		}
	}
	t.Fatal("netns: every subnet of 10.213.0.0/16 is taken")
	return 0, nil
}

// sweep removes the namespaces, links and root blackholes of networks
// whose runs ended without removing them (killed, crashed): those of a
// subnet whose lock it can take. It holds each such lock until done, so
// that no new run takes the subnet meanwhile.
func sweep(t testing.TB) {
	t.Helper()
	locks := map[int]*os.File{} // nil: a live run's
	defer func() {
		for _, lock := range locks {
			if lock != nil {
				lock.Close()
			}
		}
	}()
	for _, l := range leftovers() {
		lock, seen := locks[l.subnet]
		if !seen {
			lock = lockSubnet(t, l.subnet)
			locks[l.subnet] = lock
		}
		if lock != nil {
			if l.del[0] == "netns" {
				killIn(l.del[2])
			}
			exec.Command("ip", l.del...).Run()
		}
	}
}

// killIn kills the processes left in namespace ns by a run that ended
// without stopping them (the servers of a test killed itself): the
// namespace would outlive its deletion as long as they run.
func killIn(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// A leftover is a namespace, link or root blackhole some run of this
// package made: its subnet, and the ip arguments that delete it.
type leftover struct {
	subnet int
	del    []string
}

// leftovers lists every namespace, link and root blackhole of this
// package's networks, namespaces first: a veth goes with its namespace.
func leftovers() []leftover {
	var found []leftover
	list := func(field func(line string) (name string, del []string), args ...string) {
		out, _ := exec.Command("ip", args...).Output()
		for line := range strings.Lines(string(out)) {
			name, del := field(line)
			if num, ok := strings.CutPrefix(name, prefix); ok {
				num, _, _ = strings.Cut(num, "-")
				if subnet, err := strconv.Atoi(num); err == nil {
					found = append(found, leftover{subnet, del})
				}
			}
		}
	}
	list(func(line string) (string, []string) { // "name (id: 3)"
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		return name, []string{"netns", "del", name}
	}, "netns", "list")
	list(func(line string) (string, []string) { // "7: name@peer: <...>"
		f := strings.Fields(line)
		if len(f) < 2 {
			return "", nil
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		return name, []string{"link", "del", name}
	}, "-o", "link", "show")
	list(func(line string) (string, []string) { // "blackhole 10.213.7.11"
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[1], "10.213.") {
			return "", nil
		}
		subnet, _, _ := strings.Cut(strings.TrimPrefix(f[1], "10.213."), ".")
		return prefix + subnet, []string{"route", "del", "blackhole", f[1]}
	}, "route", "show", "type", "blackhole")
	return found
}
