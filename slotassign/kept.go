package slotassign

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/internal/atomicfile"
)

// KeptFile is the name of the file in dir where a Redis Cluster node
// over etcd keeps the last assignment it read: at a start, before it has
// read etcd (16-200 ms, or as long as etcd is unreachable), it answers
// CLUSTER SLOTS, SHARDS and NODES from it, every slot listed, rather
// than with no slot at all, which cluster clients cannot use (redis-py's
// RedisCluster raises at once; node-redis's fails every command for as
// long as it lives).
const KeptFile = "idserver.slots"

// Kept says where a Source keeps the last assignment it read: the file
// (KeptFile in dir) and the etcd-prefix it is read under (an assignment
// kept under another prefix is another cluster's: not shown). A Path of
// "" keeps nothing.
type Kept struct {
	Path, Prefix string         // the file, and the etcd-prefix its assignment is of
	Log          zerolog.Logger // says why the file cannot be read or written
}

// keptView is what the file holds: a slotView as read, whole, so that a
// node restarted shows the map exactly as it last saw it (owners then
// live as live, owners gone as gone), serving none of it.
type keptView struct {
	Prefix     string
	Rev        int64
	Assignment assignment
	Live       map[int64]keptNode // by server-id
	Alive      map[int64]bool     // by lease
}

// keptNode is a liveNode, its lease exported.
type keptNode struct {
	Node
	Lease int64
}

// encode is v as the file holds it.
func (k Kept) encode(v slotView) []byte {
	kv := keptView{Prefix: k.Prefix, Rev: v.rev, Assignment: v.a, Live: map[int64]keptNode{}, Alive: v.alive}
	for id, n := range v.nodes {
		kv.Live[id] = keptNode{Node: n.Node, Lease: n.lease}
	}
	b, _ := json.Marshal(kv) // of ints, strings and maps of them: it cannot fail
	return b
}

// load reads the view kept; ok is false if there is none (a first start,
// a file of another prefix, or one that cannot be read: said in the log,
// as the server still starts, only without the view).
func (k Kept) load() (v slotView, data []byte, ok bool) {
	if k.Path == "" {
		return slotView{}, nil, false
	}
	data, err := os.ReadFile(k.Path)
	var kv keptView
	if err == nil {
		err = json.Unmarshal(data, &kv)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return slotView{}, nil, false
	case err != nil:
		k.Log.Warn().Err(err).Str("file", k.Path).Msg("cluster: the slot assignment kept from the last run cannot be read: answering CLUSTER SLOTS only once etcd is read")
		return slotView{}, nil, false
	case kv.Prefix != k.Prefix:
		return slotView{}, nil, false
	}
	v = slotView{rev: kv.Rev, a: kv.Assignment, nodes: map[int64]liveNode{}, alive: kv.Alive}
	if v.alive == nil {
		v.alive = map[int64]bool{}
	}
	for id, n := range kv.Live {
		v.nodes[id] = liveNode{Node: n.Node, lease: n.Lease}
	}
	return v, data, true
}

// save writes data, the encoding of a view, unless it is what was
// written last (then nothing changed): it changes only with the
// assignment's version or its nodes, so a write, made after the map is
// in force, costs the slot keeper milliseconds a change.
func (k Kept) save(data, last []byte) (written []byte) {
	if k.Path == "" || bytes.Equal(data, last) {
		return last
	}
	if err := atomicfile.Write(k.Path, data); err != nil {
		k.Log.Warn().Err(fmt.Errorf("keep the slot assignment: %w", err)).Str("file", k.Path).
			Msg("cluster: a restart answers CLUSTER SLOTS from an older assignment until it reads etcd")
		return last
	}
	return data
}
