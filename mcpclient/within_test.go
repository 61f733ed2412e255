package mcpclient

import "testing"

func TestWithin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		inner, dir string
		want       bool
	}{
		{"/home/u", "/", true},
		{"/home/u", "/home/u", true},
		{"/home/u", "/home", true},
		{"/home/u", "/home/u/.cache", false},
		{"/home/u", "/srv", false},
		{"/srv/..cache/u", "/srv", true}, // a name starting with two dots is inside
		{"/srv/..cache/u", "/srv/..cache", true},
	} {
		if got := within(c.inner, c.dir); got != c.want {
			t.Errorf("within(%q, %q) = %v, want %v", c.inner, c.dir, got, c.want)
		}
	}
}
