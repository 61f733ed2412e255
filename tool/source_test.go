package tool_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/toolwire/toolwire/tool"
)

func sourced(source, name string) *tool.Tool {
	t := readTool(name)
	t.Origin = tool.Origin{Source: source, Name: name}
	return t
}

// A source never takes a name that another holds, keeps its own names from
// one Replace to the next, and leaves nothing behind once closed.
func TestSourceReplace(t *testing.T) {
	reg := tool.NewRegistry(nil)
	a, b := reg.NewSource(), reg.NewSource()
	if err := reg.Register(readTool("direct")); err != nil {
		t.Fatal(err)
	}
	if c, err := a.Replace([]*tool.Tool{sourced("a", "x"), sourced("a", "y")}); err != nil || len(c) != 0 {
		t.Fatalf("a.Replace = %v, %v", c, err)
	}
	c, err := b.Replace([]*tool.Tool{sourced("b", "x"), sourced("b", "z"), sourced("b", "direct")})
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, cf := range c {
		lost = append(lost, cf.Tool.Name+"<-"+cf.Holder.Source)
	}
	if want := []string{"x<-a", "direct<-"}; !slices.Equal(lost, want) {
		t.Errorf("b's conflicts = %v, want %v", lost, want)
	}
	if got, _ := reg.Lookup("x"); got.Origin.Source != "a" {
		t.Errorf("x belongs to %q, want a", got.Origin.Source)
	}
	if got := b.Names(); !slices.Equal(got, []string{"z"}) {
		t.Errorf("b.Names() = %v, want [z]", got)
	}

	// a's own names are free to it; the one it drops goes.
	if c, err := a.Replace([]*tool.Tool{sourced("a", "x")}); err != nil || len(c) != 0 {
		t.Fatalf("a.Replace again = %v, %v", c, err)
	}
	if reg.Has("y") || !reg.Has("x") {
		t.Errorf("after a's second Replace the registry holds %v", names(reg.List()))
	}

	// A failing batch changes nothing.
	if _, err := a.Replace([]*tool.Tool{sourced("a", "q"), sourced("a", "q")}); !errors.Is(err, tool.ErrDuplicateName) {
		t.Errorf("a.Replace with a duplicate = %v, want ErrDuplicateName", err)
	}
	if !reg.Has("x") || reg.Has("q") {
		t.Errorf("a failed Replace changed the registry: %v", names(reg.List()))
	}

	// Deregistering directly frees the name in the source too.
	reg.Deregister("z")
	if got := b.Names(); len(got) != 0 {
		t.Errorf("b.Names() after Deregister(z) = %v", got)
	}

	if n := a.Close(); n != 1 {
		t.Errorf("a.Close() = %d, want 1", n)
	}
	if _, err := a.Replace([]*tool.Tool{sourced("a", "x")}); !errors.Is(err, tool.ErrSourceClosed) {
		t.Errorf("Replace after Close = %v, want ErrSourceClosed", err)
	}
	if got := names(reg.List()); !slices.Equal(got, []string{"direct"}) {
		t.Errorf("after a.Close the registry holds %v, want [direct]", got)
	}
}

// A watcher runs with no lock held: it may read the registry and the
// source, and stop itself, from inside the notification.
func TestSourceWatcherMayCallBack(t *testing.T) {
	reg := tool.NewRegistry(nil)
	src := reg.NewSource()
	var seen [][]string
	var stop func()
	stop = reg.Watch(func() {
		seen = append(seen, append(names(reg.List()), src.Names()...))
		if len(seen) == 2 {
			stop()
		}
	})
	if _, err := src.Replace([]*tool.Tool{sourced("s", "a")}); err != nil {
		t.Fatal(err)
	}
	src.Close()
	if err := reg.Register(readTool("b")); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || !slices.Equal(seen[0], []string{"a", "a"}) || len(seen[1]) != 0 {
		t.Errorf("watcher saw %v, want [[a a] []] and nothing after it stopped itself", seen)
	}
}
