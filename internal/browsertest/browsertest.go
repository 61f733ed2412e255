// Package browsertest runs a real headless Chromium for tests, fenced to
// 127.0.0.1, and hands the test a tab to drive with chromedp:
//
//	func TestPage(t *testing.T) {
//		t.Parallel()
//		tab := browsertest.New(t, nil)
//		err := chromedp.Do(tab, chromedp.Navigate(url), chromedp.Click(`button[value="allow"]`))
//		...
//		text, err := chromedp.Run(tab, chromedp.Text("body"))
//		...
//	}
//
// Each call of [New] starts a browser of its own, with a temporary profile,
// and stops it when the test ends (the kernel kills it too if the test
// binary dies). The browser resolves no name but 127.0.0.1 and the names
// the test lists in [Options].Resolve (which also mean 127.0.0.1): every
// other name fails as not found, so a page can reach nothing beyond the
// machine, and the browser's own traffic (updates, DNS over HTTPS, sync,
// QUIC) is off.
//
// Without a Chromium (/usr/bin/chromium, or chromium or chromium-browser on
// PATH) a test that asks for a browser is skipped, except under CI=true,
// where it fails: CI installs Debian's chromium (.ci/run).
package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// Options adjust the browser of [New]. Nil means none.
type Options struct {
	// Resolve lists host names the browser resolves to 127.0.0.1, as a
	// DNS rebinding attacker's name would be: a page at http://NAME:PORT
	// is then served by whatever listens on 127.0.0.1:PORT.
	Resolve []string
}

// Path returns the Chromium a test would run, or an error saying none
// was found.
func Path() (string, error) {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium", nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("browsertest: no chromium (/usr/bin/chromium, or chromium or chromium-browser on PATH); install Debian's chromium")
}

// New starts a headless Chromium for t and returns the context of its
// first tab, for chromedp.Do and chromedp.Run. The browser is stopped, and its profile
// removed, when t ends. A context derived from the returned one (say,
// with a timeout) drives the same tab; chromedp.NewContext(tab) opens
// another tab of the same browser.
func New(t testing.TB, opts *Options) context.Context {
	t.Helper()
	path, err := Path()
	if err != nil {
		if os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	rules, err := resolverRules(o.Resolve)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // root in containers, and the test's pages are its own
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-features", "DnsOverHttps"),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("host-resolver-rules", rules),
		chromedp.CombinedOutput(out),
	)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	// Cleanups run last-in first-out: the browser stops before t.TempDir
	// removes its profile.
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// The first action starts the browser, on a context that lives as
	// long as the test, not as long as some later action's timeout.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("browsertest: starting %s: %v\n%s", path, err, out.String())
	}
	return tab
}

// resolverRules returns Chromium's --host-resolver-rules: names listed map
// to 127.0.0.1, every other name but 127.0.0.1 is not found.
func resolverRules(names []string) (string, error) {
	var rules []string
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, " ,*:/") {
			return "", fmt.Errorf("browsertest: Options.Resolve: %q is not a host name", n)
		}
		rules = append(rules, "MAP "+n+" 127.0.0.1")
	}
	rules = append(rules, "MAP * ~NOTFOUND", "EXCLUDE 127.0.0.1")
	return strings.Join(rules, ", "), nil
}

// syncBuffer keeps the browser's output, written from chromedp's
// goroutine, for the message of a failed start.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		return len(p), nil // enough to say why it failed
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
