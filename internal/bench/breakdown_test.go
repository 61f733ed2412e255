//go:build unix

package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// rawText is go tool pprof -raw output in the shape Go 1.26 prints, cut
// down: location 3 has an inlined frame on a second line.
const rawText = `PeriodType: cpu nanoseconds
Period: 10000000
Samples:
samples/count cpu/nanoseconds
          2   20000000: 1 3 4 
          1   10000000: 2 4 
          5   50000000: 5 
Locations
     1: 0x4402af M=1 github.com/toolwire/toolwire/audit.(*FileSink).Write /src/audit/sink.go:90:0 s=88
     2: 0x4402b0 M=1 encoding/json.Marshal /go/src/encoding/json/encode.go:10:0 s=9
     3: 0x4402c0 M=1 github.com/toolwire/toolwire/tool.(*batch).prepare /src/tool/executor.go:150:0 s=140
             github.com/toolwire/toolwire/tool.(*Executor).Run /src/tool/executor.go:90:0 s=80
     4: 0x4402d0 M=1 main.main /src/main.go:1:0 s=1
     5: 0x4402e0 M=1 runtime.bgsweep /go/src/runtime/mgcsweep.go:300:0 s=272
Mappings
1: 0x400000/0x800000/0x0 /tmp/toolwire 
`

func TestParseRaw(t *testing.T) {
	p := parseRaw([]byte(rawText))
	want := []rawSample{
		{20000000, []string{"github.com/toolwire/toolwire/audit.(*FileSink).Write", "github.com/toolwire/toolwire/tool.(*batch).prepare", "github.com/toolwire/toolwire/tool.(*Executor).Run", "main.main"}},
		{10000000, []string{"encoding/json.Marshal", "main.main"}},
		{50000000, []string{"runtime.bgsweep"}},
	}
	if !reflect.DeepEqual(p.samples, want) {
		t.Errorf("parseRaw = %+v\nwant %+v", p.samples, want)
	}
}

// TestSplitTakesTheFirstMatchingPart checks that a sample goes to the first
// part naming any function of its stack, not to the part of its leaf, and
// that unmatched samples are "other".
func TestSplitTakesTheFirstMatchingPart(t *testing.T) {
	p := parseRaw([]byte(rawText))
	comps := []component{
		{name: "executor", re: regexp.MustCompile(`toolwire/tool\.`)},
		{name: "audit", re: regexp.MustCompile(`toolwire/audit\.`)},
		{name: "gc", re: regexp.MustCompile(`^runtime\.bgsweep$`)},
	}
	shares, total := p.split(comps)
	got := map[string]int64{}
	for _, s := range shares {
		got[s.name] = s.value
	}
	other := shares[len(shares)-1].name
	want := map[string]int64{"executor": 20000000, "audit": 0, "gc": 50000000, other: 10000000}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("split = %v, want %v", got, want)
	}
	if total != 80000000 {
		t.Errorf("total = %d, want 80000000", total)
	}
}

// TestSplitBenchLoop checks that the bench's own code, main and this
// package (whose path is under toolwire/), is the bench's loop in the
// caller's and the listing's breakdowns, not a part of toolwire.
func TestSplitBenchLoop(t *testing.T) {
	t.Parallel()
	const (
		loop  = "github.com/toolwire/toolwire/internal/bench.(*bench).listTW"
		adapt = "github.com/toolwire/toolwire/mcpclient.(*Server).register"
	)
	p := &rawProfile{samples: []rawSample{
		{1, []string{"runtime.mallocgc", loop, "main.main"}},
		{2, []string{"runtime.mallocgc", loop}},
		{4, []string{adapt, loop}},
	}}
	for _, tc := range []struct {
		role  string
		parts map[string]int64
	}{
		{"list", map[string]int64{
			"the bench's own loop": 3,
			"toolwire adaptation and registration, the rest (names, tiers, pins, registry)": 4,
		}},
		{"bench", map[string]int64{"the bench's own loop": 3, "toolwire mcpclient": 4}},
	} {
		shares, total := p.split(components[tc.role])
		got := map[string]int64{}
		for _, s := range shares {
			if s.value != 0 {
				got[s.name] = s.value
			}
		}
		if !reflect.DeepEqual(got, tc.parts) || total != 7 {
			t.Errorf("%s: split = %v (total %d), want %v (total 7)", tc.role, got, total, tc.parts)
		}
	}
}

// TestTheSessionTransportPartNamesTheGatewaysCodecCalls: every function of
// internal/stdioconn that the gateway's code calls is in the part of the
// session transport, not in the upstream leg's, which takes the rest of
// stdioconn. A call the part did not name counted the gateway's decoding
// of a request as the upstream leg's.
func TestTheSessionTransportPartNamesTheGatewaysCodecCalls(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../gateway/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("the gateway's files: %v %v", files, err)
	}
	re := regexp.MustCompile(sessionTransport)
	call := regexp.MustCompile(`stdioconn\.([A-Z]\w*)\(`)
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			seen++
			if fn := "github.com/toolwire/toolwire/internal/stdioconn." + m[1]; !re.MatchString(fn) {
				t.Errorf("%s calls %s, which the session transport's part does not name", filepath.Base(f), fn)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no call of stdioconn found in the gateway's code")
	}
}

// Each profile is broken down by the parts of its process's kind: a
// fleet's replicas (serve1, serve2, …) as serve, the demo behind a
// gateway as the demo, a listing as a listing; a role with digits that
// name no kind stays as it is (and has no parts).
func TestComponentSetOfEachRole(t *testing.T) {
	for _, c := range []struct{ role, phase, want string }{
		{"serve", "c8", "serve"},
		{"serve1", "c64", "serve"},
		{"serve12", "c64", "serve"},
		{"upstream", "seq", "demo"},
		{"bench", "list", "list"},
		{"proxy", "c8", "proxy"},
		{"9", "c8", "9"},
		{"other3", "c8", "other3"},
	} {
		if got := componentSet(c.role, c.phase); got != c.want {
			t.Errorf("componentSet(%q, %q) = %q, want %q", c.role, c.phase, got, c.want)
		}
	}
}
