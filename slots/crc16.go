package slots

// crc16 is CRC16-CCITT in its XMODEM form (polynomial 0x1021, initial
// value 0, no reflection, no final xor), the checksum Redis Cluster maps
// keys with (src/crc16.c): "123456789" gives 0x31C3. Written here
// because go-redis keeps its copy internal; a table of 256 entries
// built once, as Redis's.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^c]
	}
	return crc
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
