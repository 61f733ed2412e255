//go:build unix

package bench

import (
	"reflect"
	"testing"

	"github.com/toolwire/toolwire/config"
)

// Every count and rate of gateway.limits is set in both of the bench's
// settings: a limit added to the gateway later, with a default that
// refuses one load generator on one address, would otherwise apply to the
// bench unseen (as 100 calls/s per caller once broke gw-serve). Durations
// and sizes are left at their defaults: they bound slowness and size, not
// the load.
func TestServeLimitsNameEveryCountAndRate(t *testing.T) {
	t.Parallel()
	for lim, block := range limitsYAML {
		f, err := config.Parse("bench.yaml", []byte("servers:\n  demo:\n    command: demo\n"+block), t.TempDir())
		if err != nil {
			t.Fatalf("setting %d: parsing %q: %v", lim, block, err)
		}
		if f.Gateway == nil || f.Gateway.Limits == nil {
			t.Fatalf("setting %d: no gateway.limits in %q", lim, block)
		}
		v := reflect.ValueOf(f.Gateway.Limits).Elem()
		for i := range v.NumField() {
			field, name := v.Field(i), v.Type().Field(i).Name
			switch field.Type().Elem().Kind() {
			case reflect.Int, reflect.Float64:
			default:
				continue
			}
			if name == "MaxHeaderBytes" || name == "MaxBodyBytes" {
				continue
			}
			if field.IsNil() {
				t.Errorf("setting %d leaves gateway.limits' %s at its default", lim, name)
				continue
			}
			n := field.Elem()
			isZero := n.IsZero()
			if lim == limitsOff && !isZero {
				t.Errorf("limits off sets %s to %v, want 0 (no limit)", name, n)
			}
			if lim == limitsOn && isZero {
				t.Errorf("limits on sets %s to 0, which switches it off", name)
			}
		}
	}
}

// A symbol goes to the longest module its name starts with, promoted
// wrappers that name a second package included; the standard library and
// the linker's own symbols apart.
func TestSymbolSource(t *testing.T) {
	t.Parallel()
	mods := []string{"github.com/openai/openai-go/v3/packages", "github.com/openai/openai-go/v3", "github.com/toolwire/toolwire"}
	for name, want := range map[string]string{
		"github.com/toolwire/toolwire/gateway.(*stateful).ServeHTTP":                                  "github.com/toolwire/toolwire",
		"github.com/openai/openai-go/v3.shadow.77.github.com/openai/openai-go/v3/packages/param.null": "github.com/openai/openai-go/v3",
		"github.com/openai/openai-go/v3/packages/param.Opt[go.shape.string].Valid":                    "github.com/openai/openai-go/v3/packages",
		"net/http.(*conn).serve": "standard library",
		"vendor/golang.org/x/crypto/chacha20poly1305.chacha20Poly1305Seal.abi0": "standard library",
		"type:*github.com/toolwire/toolwire/tool.Executor":                      "type descriptors and linker tables",
		"go:func.*":                       "type descriptors and linker tables",
		"main.main":                       "main",
		"github.com/someone/unlisted.F":   "other: github.com/someone/unlisted",
		"github.com/toolwire/toolwirex.F": "other: github.com/toolwire/toolwirex",
	} {
		if got := symbolSource(name, mods); got != want {
			t.Errorf("symbolSource(%q) = %q, want %q", name, got, want)
		}
	}
}
