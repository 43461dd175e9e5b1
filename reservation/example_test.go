package reservation_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/reservation"
)

func ExampleOpenFile() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "idserver.state")
	store, err := reservation.OpenFile(path, zerolog.Nop())
	if err != nil {
		panic(err)
	}
	me := reservation.State{ServerID: 1, Layout: idgen.DefaultLayout, Epoch: idgen.DefaultEpoch.UnixMilli()}

	r, err := store.Resume(me) // no file yet: a first start
	fmt.Println(r.From == "", r.Floor(1000, 5*time.Second), err)

	me.Reserved = 375310358272
	store.Save(context.Background(), me)
	r, err = store.Resume(me)
	fmt.Println(r.Reserved, r.Floor(1000, 5*time.Second), err)

	// A second process on the same state file is refused.
	_, err = reservation.OpenFile(path, zerolog.Nop())
	fmt.Println(errors.Is(err, reservation.ErrLocked))

	store.Close()
	// Output:
	// true 6000 <nil>
	// 375310358272 375310358272 <nil>
	// true
}

func ExampleClaimPath() {
	me := reservation.State{ServerID: 3, Layout: idgen.DefaultLayout, Epoch: idgen.DefaultEpoch.UnixMilli()}
	fmt.Println(reservation.ClaimPath("/var/lib/idserver/idserver.state", me))
	// Output: /var/lib/idserver/idserver.state.l2-9-10-e1420041600000.id3
}
