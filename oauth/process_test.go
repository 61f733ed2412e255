package oauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/internal/sharedfile"
	"github.com/toolwire/toolwire/netpolicy"
)

// childEnv makes the test binary a child "toolwire process" that asks for
// a token once (see childMain).
const childEnv = "TOOLWIRE_OAUTH_TEST_CHILD"

// childResourceEnv gives the child the server URL the token is bound to.
const childResourceEnv = "TOOLWIRE_OAUTH_TEST_RESOURCE"

// childMain opens the store named by the environment and prints a digest
// of the token it gets.
func childMain() int {
	path := os.Getenv(childEnv)
	s, err := NewStore(path, &StoreOptions{Passphrase: testPassphrase, Argon2: cheap})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	src := NewTokenSource(s, "demo", os.Getenv(childResourceEnv), netpolicy.NewClient(nil), nil)
	t, err := src.Token()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%x\n", sha256.Sum256([]byte(t.AccessToken)))
	return 0
}

// TestTwoProcessesRefresh starts two real processes that find the token
// expired at the same moment: they must share one rotation (one refresh at
// the OP, the same token), which only the cross-process lock can ensure.
func TestTwoProcessesRefresh(t *testing.T) {
	if !sharedfile.CrossProcess {
		t.Skip("no cross-process lock on this platform")
	}
	ctx := context.Background()
	f := newFixture(t)
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	e := f.entry()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f.expire()
	outs := make([]bytes.Buffer, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+f.path, childResourceEnv+"="+f.rs.URL)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &outs[i], &stderr
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, stderr.String())
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	a, b := strings.TrimSpace(outs[0].String()), strings.TrimSpace(outs[1].String())
	if a == "" || a != b {
		t.Errorf("processes got different tokens: %q, %q", a, b)
	}
	if n := f.op.Refreshes(); n != 1 {
		t.Errorf("refreshes at the OP = %d, want 1", n)
	}
	if a == fmt.Sprintf("%x", sha256.Sum256([]byte(e.Token.AccessToken))) {
		t.Error("the processes did not refresh")
	}
}
