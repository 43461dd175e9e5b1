package reservation_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/reservation"
)

func ExampleFileStore() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	store := reservation.FileStore{Path: filepath.Join(dir, "idserver.state")}
	me := reservation.State{ServerID: 1, Layout: idgen.DefaultLayout, Epoch: idgen.DefaultEpoch.UnixMilli()}

	at, err := store.Resume(me) // no file yet: a first start
	fmt.Println(at, err)

	me.Reserved = 375310358272
	store.Save(me)
	at, err = store.Resume(me)
	fmt.Println(at, err)

	other := me
	other.ServerID = 2
	_, err = store.Resume(other)
	fmt.Println(err != nil)
	// Output:
	// 0 <nil>
	// 375310358272 <nil>
	// true
}
