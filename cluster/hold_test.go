package cluster

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/etcdsession"
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/await"
	"github.com/idserver/idserver/internal/testetcd"
	"github.com/idserver/idserver/reservation"
)

// nopTarget is a Target that serves nothing.
type nopTarget struct{}

func (nopTarget) SetGenerator(*idgen.Generator) {}
func (nopTarget) Standby(error)                 {}

// TestClaimedNotHeldWaits: a server that claims the id whose local copy
// another process has locked (one shutting down on the same dir) claims
// again after a growing wait, as when none is free: it claimed again at
// once, about 150 times a second, each claim an etcd transaction and a
// line logged.
func TestClaimedNotHeldWaits(t *testing.T) {
	e := testetcd.Start(t)
	layout := idgen.Layout{IDBits: 0, ShardBits: 10, RandomBits: 10}
	statePath := t.TempDir() + "/idserver.state"
	path := reservation.ClaimPath(statePath, reservation.State{ServerID: 0, Layout: layout, Epoch: idgen.DefaultEpoch.UnixMilli()})
	other, err := reservation.OpenFile(path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	m := New(Config{Etcd: etcdsession.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second}, Prefix: "/test/", LeaseTTL: 5 * time.Second,
		Layout: layout, Epoch: idgen.DefaultEpoch, Pinned: -1, MaxLead: time.Second, MaxWait: 100 * time.Millisecond,
		ReserveAhead: time.Second, Addr: "127.0.0.1:1", StatePath: statePath, Log: zerolog.Nop()})
	m.Start(nopTarget{})
	defer m.Close()
	await.True(t, 30*time.Second, "a first claim", func() bool { return m.claims.Load() > 0 })
	time.Sleep(3 * time.Second) // how many claims come in this while is the test, not how fast
	if n := m.claims.Load(); n > 12 {
		t.Fatalf("%d claims in 3 s of an id whose local copy is locked; want a few, each after a growing wait", n)
	}
}
