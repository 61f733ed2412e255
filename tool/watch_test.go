package tool

import (
	"context"
	"encoding/json"
	"testing"
)

func TestRegistryWatchSeesEveryChangeAfterItIsVisible(t *testing.T) {
	reg := NewRegistry(nil)
	var seen []int
	stop := reg.Watch(func() { seen = append(seen, reg.Len()) })
	h := func(context.Context, json.RawMessage) (*Result, error) { return TextResult("ok"), nil }
	if err := reg.RegisterAll([]*Tool{{Name: "a", Tier: Read, Handler: h}, {Name: "b", Tier: Read, Handler: h}}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Replace([]string{"a"}, []*Tool{{Name: "c", Tier: Read, Handler: h}}); err != nil {
		t.Fatal(err)
	}
	reg.Deregister("nope") // no change, no notification
	reg.Deregister("b")
	if err := reg.Register(&Tool{Name: "c", Tier: Read, Handler: h}); err == nil {
		t.Fatal("duplicate registered")
	}
	want := []int{2, 2, 1} // after the register, the replace, the deregister
	if len(seen) != len(want) || seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] {
		t.Fatalf("watcher saw registry sizes %v, want %v (a failed register must not notify)", seen, want)
	}
	stop()
	reg.Deregister("c")
	if len(seen) != 3 {
		t.Errorf("a stopped watcher was still called: %v", seen)
	}
}
