package resplimit_test

import (
	"fmt"

	"github.com/idserver/idserver/resplimit"
)

// A server feeds each read to the connection's Scanner: complete commands
// before a violation are answered, then the error reply is sent and the
// connection closed. Partial says how much is an unfinished command.
func ExampleScanner() {
	s := resplimit.NewScanner(resplimit.Limits{MaxBulkLen: 64 << 10, MaxMultibulkLen: 1024})
	read := []byte("*1\r\n$5\r\nGETID\r\n*1\r\n$6\r\nMGE")
	valid, err := s.Scan(read)
	fmt.Println(valid, err, "whole commands:", valid-s.Partial(), "bytes")

	// Unguarded, redcon would walk 2^31 array slots on every read from now on.
	valid, err = s.Scan([]byte("TID\r\n*2147483647\r\n"))
	fmt.Printf("%d valid, then -%v\n", valid, err)
	// Output:
	// 26 <nil> whole commands: 15 bytes
	// 9 valid, then -ERR Protocol error: invalid multibulk length
}
