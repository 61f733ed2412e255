//go:build unix

package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/benchkit"
)

// fleetOutput is BenchmarkFleetThroughput's output as go test prints it
// (a run of 2026-12-05, trimmed).
const fleetOutput = `goos: linux
goarch: amd64
pkg: github.com/toolwire/toolwire/cmd/toolwire
cpu: AMD EPYC
BenchmarkFleetThroughput/store=files/replicas=1-2         	    1500	       302.2 callers-cpu-µs/call	      1243 calls/s	       812.0 fleet-cpu-µs/call	        67.58 haproxy-cpu-µs/call	         0 postgres-cpu-µs/call	       744.5 replicas-cpu-µs/call
--- BENCH: BenchmarkFleetThroughput/store=files/replicas=1-2
    fleetbench_test.go:38: toolwire binary /tmp/toolwire-e2e-1836018133/toolwire (race detector: false)
BenchmarkFleetThroughput/replicas=1-2                     	    1500	       480.9 callers-cpu-µs/call	       466.7 calls/s	         4.100 db-xacts/call	      1848 fleet-cpu-µs/call	       114.6 haproxy-cpu-µs/call	       763.0 postgres-cpu-µs/call	      1733 replicas-cpu-µs/call
BenchmarkFleetThroughput/replicas=2-2                     	    1500	       431.4 callers-cpu-µs/call	       577.2 calls/s	         4.000 db-xacts/call	      1766 fleet-cpu-µs/call	       103.1 haproxy-cpu-µs/call	       955.8 postgres-cpu-µs/call	      1662 replicas-cpu-µs/call
BenchmarkFleetThroughput/replicas=3-2                     	    1500	       358.0 callers-cpu-µs/call	       620.3 calls/s	         4.200 db-xacts/call	      1829 fleet-cpu-µs/call	        94.76 haproxy-cpu-µs/call	      1078 postgres-cpu-µs/call	      1734 replicas-cpu-µs/call
PASS
`

// TestFleetReport reads the fleet benchmark's lines and checks issue
// 26's fleet targets against them: the CPU of replica and database
// against the gateway on files, three replicas against one.
func TestFleetReport(t *testing.T) {
	rows, err := parseFleet([]byte(fleetOutput))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || !rows[0].files || rows[0].replicas != 1 || rows[3].replicas != 3 || rows[3].files {
		t.Fatalf("rows %+v", rows)
	}
	if r := rows[1]; r.callsPS != 466.7 || r.replicaCPU != 1733 || r.pgCPU != 763 || r.xacts != 4.1 || r.haproxyCPU != 114.6 || r.callersCPU != 480.9 {
		t.Errorf("1 replica: %+v", r)
	}
	fr := &fleetRun{rows: rows, calls: 1500, load0: "1.00 2.00 3.00", load1: "4.00 5.00 6.00", bgCores: 0.5}
	md := fr.markdown()
	for _, want := range []string{
		"| files | 1 | 1243 | 744 µs | 0 µs | 744 µs | – |",
		"| PostgreSQL | 1 | 467 | 1.73 ms | 763 µs | 2.50 ms | 3.35× |",
		"| 3.35× (1.73 ms + 763 µs against 744 µs) | no |",
		"| 1.33× (620 against 467 calls/s) | yes |",
		"Load average 1.00 2.00 3.00 before, 4.00 5.00 6.00 after",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// TestFleetReportRefusesWhatItCannotRead: output without results, or a
// result line whose figures are missing or not numbers, is an error, not
// a table of zeros.
func TestFleetReportRefusesWhatItCannotRead(t *testing.T) {
	for name, out := range map[string]string{
		"nothing":      "PASS\n",
		"a failure":    "--- FAIL: BenchmarkFleetThroughput/replicas=1\n    fleetbench_test.go:99: 3 calls failed\nFAIL\n",
		"no figures":   "BenchmarkFleetThroughput/replicas=1-2 \t 1500 \t 0 ns/op\n",
		"not a number": "BenchmarkFleetThroughput/replicas=1-2 \t 1500 \t x calls/s \t 1 replicas-cpu-µs/call\n",
		"no replicas":  "BenchmarkFleetThroughput/store=files-2 \t 1500 \t 1 calls/s \t 1 replicas-cpu-µs/call \t 1 postgres-cpu-µs/call \t 1 haproxy-cpu-µs/call \t 1 callers-cpu-µs/call\n",
	} {
		if rows, err := parseFleet([]byte(out)); err == nil {
			t.Errorf("%s: parsed %+v, want an error", name, rows)
		}
	}
}

// The fleet benchmark's index of its replicas' profiles: each line a
// profile of the measured calls, the last of a row counting; a line that
// lacks a field, or whose counts are not counts, is an error naming the
// line.
func TestReadFleetProfiles(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		t.Helper()
		path := filepath.Join(dir, benchkit.FleetProfileIndex)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ps, err := readFleetProfiles(write("fleet_files_r1\t1\t8000\tfleet_files_r1-c64-serve1.pprof\n" + // go test's first run, of one iteration
		"fleet_files_r1\t3000\t2500000000\tfleet_files_r1-c64-serve1.pprof\n" +
		"fleet_r3\t3000\t3100000000\tfleet_r3-c64-serve1.pprof\tfleet_r3-c64-serve2.pprof\tfleet_r3-c64-serve3.pprof\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].row != "fleet_files_r1" || ps[0].calls != 3000 || ps[0].wall != 2500*time.Millisecond ||
		ps[1].phase != "c64" || len(ps[1].files) != 3 || ps[1].files[2] != "fleet_r3-c64-serve3.pprof" {
		t.Errorf("read %+v", ps)
	}
	for name, text := range map[string]string{
		"empty":           "",
		"no files":        "fleet_r1\t3000\t1\n",
		"calls not count": "fleet_r1\tmany\t1\tx.pprof\n",
		"no calls":        "fleet_r1\t0\t1\tx.pprof\n",
		"wall not count":  "fleet_r1\t3000\t1.5s\tx.pprof\n",
	} {
		if ps, err := readFleetProfiles(write(text)); err == nil {
			t.Errorf("%s: read %+v, want an error", name, ps)
		}
	}
	if _, err := readFleetProfiles(filepath.Join(dir, "missing.tsv")); err == nil {
		t.Errorf("a missing index: no error")
	}
}
