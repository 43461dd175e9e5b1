package sequence

import "errors"

// ErrNotServed is a Backend's answer to a Take of a key that this server
// does not serve now, or did not serve all the while the take ran: in a
// Redis Cluster over etcd, a key is served by its hash slot's owner only,
// and values reserved before a slot became a server's (again) may lie
// below values another server handed out meanwhile. Nothing taken is
// handed out, and no store failed.
var ErrNotServed = errors.New("the key's hash slot is not this server's")

// Drop skips the values in hand of every key for which drop is true, as
// if they were handed out: the next value of each is taken anew, above
// everything reserved for it. A server of a Redis Cluster drops the keys
// of the slots that become its: what it held of them was reserved before
// another server may have handed out larger values.
func (t *Table) Drop(drop func(key string) bool) {
	t.each(func(e *entry) {
		if e.left() > 0 && drop(e.key) {
			e.issued = e.end()
			e.limit, e.next = e.issued, segment{}
		}
	})
}

// Handed is a hash slot's keys as their old owner hands them over to the
// slot's new owner, with the generation at which it held them (0: it
// cannot hand them over: it still serves the slot, or holds none).
type Handed struct {
	Slot  int
	Gen   int64
	Marks []Mark // each key's last value handed out, exactly
}
