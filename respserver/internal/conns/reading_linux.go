package conns

import (
	"reflect"
	"syscall"

	"github.com/panjf2000/gnet/v2"
)

// pollerFD is the epoll descriptor of gc's event loop, or -1 if gnet's
// layout is not the one expected (then clients are read while they wait,
// as before). gnet v2.10 keeps it unexported, in conn.loop.poller.fd;
// reflect may read unexported fields. TestWaitStopsReading fails if it is
// no longer found.
func pollerFD(gc gnet.Conn) int {
	v := reflect.ValueOf(gc)
	for _, name := range []string{"loop", "poller", "fd"} {
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			return -1
		}
		v = v.Elem().FieldByName(name)
	}
	if v.Kind() != reflect.Int || v.Int() <= 0 {
		return -1
	}
	return int(v.Int())
}

// setReadEvents has epoll descriptor epfd report gc's socket readable or
// not, and writable while gnet holds replies it has not written, as
// gnet's level-triggered poller sets them (netpoll's ReadEvents and
// WriteEvents). Not read, it is still watched for the client's close
// (EPOLLRDHUP, on which gnet closes it), as reading it would have found
// it: a client gone does not have the commands behind a wait run.
func setReadEvents(epfd int, gc gnet.Conn, read bool) error {
	var ev uint32 = syscall.EPOLLRDHUP
	if read {
		ev = syscall.EPOLLIN | syscall.EPOLLPRI
	}
	if gc.OutboundBuffered() > 0 {
		ev |= syscall.EPOLLOUT
	}
	fd := gc.Fd()
	return syscall.EpollCtl(epfd, syscall.EPOLL_CTL_MOD, fd, &syscall.EpollEvent{Events: ev, Fd: int32(fd)})
}
