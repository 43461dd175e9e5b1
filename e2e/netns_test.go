package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A netns is a network namespace a test made, joined to the host by a
// veth pair: the host's end has HostIP and EtcdIP, the namespace's NsIP,
// in a /24 of 10/8 picked at random (so that tests of other sessions on
// the machine do not meet it). A route the test adds in the namespace
// (Blackhole) drops its packets to an address: a partition, without
// netem or iptables, which this machine lacks.
type netns struct {
	t                    *testing.T
	name                 string
	HostIP, EtcdIP, NsIP string
}

// newNetns makes a namespace for t, deleted when t ends. Where one
// cannot be made (not root, no ip), t is skipped loudly, or failed under
// CI=true, where it can.
func newNetns(t *testing.T) *netns {
	t.Helper()
	tag := fmt.Sprintf("%06x", rand.IntN(1<<24))
	subnet := fmt.Sprintf("10.%d.%d", 100+rand.IntN(100), rand.IntN(250))
	n := &netns{t: t, name: "idsrv-" + tag, HostIP: subnet + ".1", EtcdIP: subnet + ".3", NsIP: subnet + ".2"}
	host, peer := "idh"+tag, "idn"+tag
	steps := [][]string{
		{"netns", "add", n.name},
		{"link", "add", host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", n.name},
		{"addr", "add", n.HostIP + "/24", "dev", host},
		{"addr", "add", n.EtcdIP + "/32", "dev", host},
		{"link", "set", host, "up"},
		{"netns", "exec", n.name, "ip", "addr", "add", n.NsIP + "/24", "dev", peer},
		{"netns", "exec", n.name, "ip", "link", "set", peer, "up"},
		{"netns", "exec", n.name, "ip", "link", "set", "lo", "up"},
	}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", n.name).Run() // its end of the pair goes with it, and so the pair
		exec.Command("ip", "link", "del", host).Run()
	})
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			msg := fmt.Sprintf("NO PARTITION TESTED: cannot make a network namespace (ip %s: %v: %s); run as root", strings.Join(s, " "), err, out)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	return n
}

// Exec is the command that runs name with args in n.
func (n *netns) Exec(name string, args ...string) (string, []string) {
	return "ip", append([]string{"netns", "exec", n.name, name}, args...)
}

// Blackhole drops n's packets to addr (heal: false stops that).
func (n *netns) Blackhole(addr string, on bool) {
	n.t.Helper()
	verb := "add"
	if !on {
		verb = "del"
	}
	if out, err := exec.Command("ip", "netns", "exec", n.name, "ip", "route", verb, "blackhole", addr+"/32").CombinedOutput(); err != nil {
		n.t.Fatalf("ip route %s blackhole %s in %s: %v: %s", verb, addr, n.name, err, out)
	}
}
