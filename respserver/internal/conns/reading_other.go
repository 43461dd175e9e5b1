//go:build !linux

package conns

import (
	"errors"

	"github.com/panjf2000/gnet/v2"
)

// pollerFD is -1 but on Linux: clients are read while they wait.
func pollerFD(gnet.Conn) int { return -1 }

func setReadEvents(int, gnet.Conn, bool) error { return errors.ErrUnsupported }
