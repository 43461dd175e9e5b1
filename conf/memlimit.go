package conf

import "github.com/idserver/idserver/sequence"

// MemoryLimitRule is the Go runtime's memory limit that MemoryLimit
// computes, in words: --help shows it in maxmemory-clients' usage, and
// redis.conf.example and the docs quote it (TestMemoryLimitRule keeps
// them in step).
const MemoryLimitRule = "twice maxmemory-clients, plus what seq-max-keys keys of seq-max-key-bytes take, plus 128mb"

// memoryLimitSpare is what the server itself is allowed beside its
// clients and its sequences.
const memoryLimitSpare = 128 << 20

// MemoryLimit is the Go runtime's memory limit for c (MemoryLimitRule),
// which main sets unless GOMEMLIMIT is set: 0, none, without
// maxmemory-clients. The collector then works harder as the heap nears
// it, before the clients reach their bound rather than after: what they
// hold may take twice its size in buffers, the sequences what their
// bounds allow (each key its bytes and sequence.EntryBytes), and the
// server itself some more.
func (c *Config) MemoryLimit() int64 {
	if c.MaxMemoryClients == 0 {
		return 0
	}
	seqs := int64(c.SeqMaxKeys) * int64(c.SeqMaxKeyBytes+sequence.EntryBytes)
	return 2*int64(c.MaxMemoryClients) + seqs + memoryLimitSpare
}
