package idgen_test

import (
	"fmt"
	"time"

	"github.com/idserver/idserver/idgen"
)

func Example() {
	g, err := idgen.New(idgen.Settings{ServerID: 1})
	if err != nil {
		panic(err)
	}
	a, _ := g.Next()
	b, _ := g.Next()
	fmt.Println(b > a)

	p, _ := g.Decode(b)
	fmt.Println(p.ServerID, time.Since(p.Time) < time.Minute)
	// Output:
	// true
	// 1 true
}

func ExampleDecode() {
	// 1 ms after the epoch, server-id 2, shard 3, random 4, default layout.
	id := int64(1)<<21 | 2<<19 | 3<<10 | 4
	p, _ := idgen.Decode(id, idgen.DefaultLayout, idgen.DefaultEpoch)
	fmt.Println(p.Time.UTC().Format(time.RFC3339Nano), p.ServerID, p.Shard, p.Random)
	// Output: 2014-12-31T16:00:00.001Z 2 3 4
}
