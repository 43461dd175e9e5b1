package ratelog

import (
	"testing"
	"time"
)

// TestByText: a failing store's error is logged at once, then once every
// Every with the count held back; another error is logged at once.
func TestByText(t *testing.T) {
	var l ByText
	t0 := time.Unix(1000, 0)
	if ok, _ := l.Allow("disk full", t0); !ok {
		t.Fatal("first failure not logged")
	}
	for i := range 59 {
		if ok, _ := l.Allow("disk full", t0.Add(time.Duration(i+1)*100*time.Millisecond)); ok {
			t.Fatalf("repeat %d within %v logged", i+1, Every)
		}
	}
	if ok, _ := l.Allow("etcd: NOSPACE", t0.Add(time.Second)); !ok {
		t.Fatal("a new error not logged at once")
	}
	if ok, held := l.Allow("disk full", t0.Add(Every)); !ok || held != 59 {
		t.Fatalf("after %v: logged %v with %d held back, want 59", Every, ok, held)
	}
}
