package slots

// crc16 is CRC16-CCITT in its XMODEM form (polynomial 0x1021, initial
// value 0, no reflection, no final xor), the checksum Redis Cluster maps
// keys with (src/crc16.c): "123456789" gives 0x31C3. Written here
// because go-redis keeps its copy internal and no well-kept Go library
// slices a 16-bit CRC: eight bytes at a time, by eight tables (as
// hash/crc32 does for its own), since a key's slot is computed as it is
// made and for every key a restart loads (byte at a time, a million keys
// of 512 bytes took 3.3 s of a cluster node's start).
func crc16(b []byte) uint16 {
	var crc uint16
	for ; len(b) >= 8; b = b[8:] {
		// The register is the next two bytes' xor: each byte's share of
		// the CRC after the rest of the eight, from its table.
		t := &crc16Tables
		crc = t[7][b[0]^byte(crc>>8)] ^ t[6][b[1]^byte(crc)] ^ t[5][b[2]] ^ t[4][b[3]] ^
			t[3][b[4]] ^ t[2][b[5]] ^ t[1][b[6]] ^ t[0][b[7]]
	}
	for _, c := range b {
		crc = crc<<8 ^ crc16Tables[0][byte(crc>>8)^c]
	}
	return crc
}

// crc16Tables[k][c] is the CRC of byte c followed by k zero bytes.
var crc16Tables = func() (t [8][256]uint16) {
	for i := range t[0] {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[0][i] = crc
	}
	for k := 1; k < len(t); k++ {
		for i := range t[k] {
			prev := t[k-1][i]
			t[k][i] = prev<<8 ^ t[0][prev>>8]
		}
	}
	return t
}()
