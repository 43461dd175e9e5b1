package lifecycle

import (
	"cmp"
	"net"

	"github.com/idserver/idserver/conf"
	"github.com/idserver/idserver/listen"
	"github.com/idserver/idserver/slots"
)

// addrOf is the address clients reach this server at, for its claim:
// the first of bind's it listens on (0.0.0.0:port for *, as it is
// bound), the plain port's if on.
func addrOf(lns *listen.Set) string {
	if len(lns.Plain) > 0 {
		return lns.Plain[0].Addr().String()
	}
	return lns.TLS[0].Addr().String()
}

// oneNodeCluster is the Redis Cluster of cluster-enabled yes without
// etcd: this node (announced) owns every slot.
func oneNodeCluster(cfg *conf.Config, lns *listen.Set) (slots.Source, error) {
	self, err := announced(cfg, lns)
	if err != nil {
		return nil, err
	}
	return slots.NewStatic(self.ID, slots.Single(self)), nil
}

// announced is this node as cluster clients (and, of its cluster-port,
// the other servers) are told of it, with the ID kept in dir: the
// cluster-announce-* address and ports, or the first address and ports
// it listens on (no address when that is every address: then clients use
// the one they reached, as with Redis).
func announced(cfg *conf.Config, lns *listen.Set) (slots.Node, error) {
	id, err := slots.LoadID(cfg.Dir)
	if err != nil {
		return slots.Node{}, err
	}
	self := slots.Node{ID: id, IP: cfg.ClusterAnnounceIP, Port: cfg.ClusterAnnouncePort,
		TLSPort: cfg.ClusterAnnounceTLSPort, BusPort: cfg.ClusterAnnounceBusPort, Hostname: cfg.ClusterAnnounceHostname}
	first := func(lns []net.Listener) *net.TCPAddr {
		if len(lns) > 0 {
			if a, ok := lns[0].Addr().(*net.TCPAddr); ok {
				return a
			}
		}
		return nil
	}
	plain, tls, peers := first(lns.Plain), first(lns.TLS), first(lns.Peers)
	if self.IP == "" {
		if a := cmp.Or(plain, tls); a != nil && !a.IP.IsUnspecified() {
			self.IP = a.IP.String()
		}
	}
	if self.Port == 0 && plain != nil {
		self.Port = plain.Port
	}
	if self.TLSPort == 0 && tls != nil {
		self.TLSPort = tls.Port
	}
	if self.BusPort == 0 && peers != nil {
		self.BusPort = peers.Port
	}
	return self, nil
}
