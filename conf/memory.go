package conf

// Memory is what the server may hold in memory, derived from the
// configuration here and nowhere else: main sets the Go runtime's memory
// limit to Limit (unless GOMEMLIMIT is set), and --help,
// redis.conf.example and the docs quote its formula, MemoryLimitRule.
type Memory struct {
	// Limit is the Go runtime's memory limit: twice maxmemory-clients
	// (what the clients hold may take twice its size in buffers), what
	// seq-max-keys keys of seq-max-key-bytes cost (keyBytes, given by
	// the sequences' package: sequence.KeyBytes), and 128 MiB for the
	// server itself. 0 with maxmemory-clients 0: no limit.
	Limit int64
	// Ceiling bounds the process's RSS: Limit, and OutsideHeap for what
	// the Go runtime does not count (the binary's pages, and the pages
	// of the sequence file bbolt maps). 0 with no limit.
	Ceiling int64
}

// MemoryLimitRule is Memory.Limit's formula in words: --help shows it in
// maxmemory-clients' usage, and redis.conf.example and the docs quote it
// (TestMemoryLimitRule keeps them in step).
const MemoryLimitRule = "twice maxmemory-clients, plus what seq-max-keys keys of seq-max-key-bytes take, plus 128mb"

// memoryLimitSpare is what the server itself is allowed beside its
// clients and its sequences.
const memoryLimitSpare = 128 << 20

// OutsideHeap is what Memory.Ceiling allows beyond the Go runtime's limit.
const OutsideHeap = 96 << 20

// Memory derives the server's memory limit and ceiling from c, with
// keyBytes, what a sequence key of up to maxKeyBytes costs in memory at
// most (sequence.KeyBytes: the sequences' package knows it, and conf
// does not import it).
func (c *Config) Memory(keyBytes func(maxKeyBytes int) int64) Memory {
	if c.MaxMemoryClients == 0 {
		return Memory{}
	}
	limit := 2*int64(c.MaxMemoryClients) + int64(c.SeqMaxKeys)*keyBytes(c.SeqMaxKeyBytes) + memoryLimitSpare
	return Memory{Limit: limit, Ceiling: limit + OutsideHeap}
}
