package browsertest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestTheBrowserReachesOnly127001: a page on 127.0.0.1 loads, and so does
// one at a name the test listed; a name not listed resolves to nothing,
// and the server never hears of it.
func TestTheBrowserReachesOnly127001(t *testing.T) {
	t.Parallel()
	var hosts atomic.Value
	hosts.Store("")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts.Store(hosts.Load().(string) + r.Host + " ")
		fmt.Fprintf(w, "<!doctype html><title>t</title><p id=host>%s</p>", r.Host)
	}))
	defer ts.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	tab := New(t, &Options{Resolve: []string{"rebound.example"}})
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()

	page := func(url string) (string, error) {
		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			return "", err
		}
		return chromedp.Run(ctx, chromedp.Text("#host"))
	}
	if got, err := page(ts.URL); err != nil || got != "127.0.0.1:"+port {
		t.Errorf("the page on 127.0.0.1: %q %v", got, err)
	}
	if got, err := page("http://rebound.example:" + port + "/"); err != nil || got != "rebound.example:"+port {
		t.Errorf("the page at a listed name: %q %v", got, err)
	}
	_, err := page("http://unlisted.example:" + port + "/")
	if err == nil || !strings.Contains(err.Error(), "ERR_NAME_NOT_RESOLVED") {
		t.Errorf("a page at a name not listed: %v, want ERR_NAME_NOT_RESOLVED", err)
	}
	if h := hosts.Load().(string); strings.Contains(h, "unlisted") {
		t.Errorf("the server was reached as %q", h)
	}
}

func TestResolverRules(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		names []string
		want  string
	}{
		{nil, "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"},
		{[]string{"a.example", "b"}, "MAP a.example 127.0.0.1, MAP b 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"},
	} {
		if got, err := resolverRules(c.names); err != nil || got != c.want {
			t.Errorf("%q: %q %v, want %q", c.names, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "*", "a.example, MAP * 10.0.0.1", "a:80", "x/y"} {
		if _, err := resolverRules([]string{bad}); err == nil || !strings.Contains(err.Error(), "Options.Resolve") {
			t.Errorf("%q: %v, want refused", bad, err)
		}
	}
}
