package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/benchkit"
)

// Issue 17's benchmarks of a fleet, reported as figures (never asserted):
//
//	go test -run '^$' -bench Fleet -benchtime 4000x ./cmd/toolwire
//
// (without -race: the replicas are built as the test binary is).

// BenchmarkFleetThroughput: calls/s of demo__echo at 64 callers (half on
// 2025-11-25 sessions, half 2026-07-28) through haproxy in front of 1, 2
// and 3 replicas on one PostgreSQL store, with the CPU each call costs:
// the replicas' (with their demo servers), haproxy's, PostgreSQL's and the
// callers' (this process), so that the cost of a replica is visible on a
// machine whose cores every replica shares.
//
// store=files is the single gateway it is compared with: one replica on
// the files of one machine, its audit to a file, behind the same haproxy
// and called by the same callers.
func BenchmarkFleetThroughput(b *testing.B) {
	b.Run("store=files/replicas=1", func(b *testing.B) {
		c := startCluster(b, fleetOptions{replicas: 1, callers: 64, security: "  pins: off\n", files: true, auditFile: true})
		measureFleet(b, c, 64)
	})
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			c := startCluster(b, fleetOptions{replicas: n, callers: 64, security: "  pins: off\n"})
			measureFleet(b, c, 64)
		})
	}
}

// BenchmarkFleetStoreLatency: the latency of one caller's calls (one at a
// time, so that nothing queues) to one replica, directly, with the files
// store and with PostgreSQL, for a 2025 session and for 2026-07-28: the
// difference is what the store adds to a call (the audit events in the
// table, the rate check, a session's touch).
func BenchmarkFleetStoreLatency(b *testing.B) {
	for _, store := range []string{"files", "postgres"} {
		for _, rev := range []string{"2025-11-25", ""} {
			name := rev
			if name == "" {
				name = "2026-07-28"
			}
			b.Run("store="+store+"/rev="+name, func(b *testing.B) {
				// One caller's calls one after the other: well past the
				// default rate, which is still checked (with the store's
				// bucket on PostgreSQL).
				c := startCluster(b, fleetOptions{replicas: 1, callers: 1, security: "  pins: off\n", files: store == "files", direct: true,
					gateway: "  limits:\n    callRate: 1000000\n    callBurst: 1000000\n"})
				ctx, cancel := context.WithTimeout(context.Background(), fleetStart)
				defer cancel()
				cs, err := dialFleet(ctx, c, newServed(c.tokens[0]), rev, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer cs.Close()
				call := func() time.Duration {
					start := time.Now()
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "latency"}})
					if err != nil || res.IsError {
						b.Fatalf("call: %v %+v", err, res)
					}
					return time.Since(start)
				}
				for range 200 { // warm: connections, pools, the session's copy
					call()
				}
				if c.dbURL != "" {
					// The warm-up's statistics reach the view once the
					// backends have been idle a second: not in the count.
					time.Sleep(2 * time.Second)
				}
				xacts0 := dbTransactions(b, c.dbURL)
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for b.Loop() {
					lat = append(lat, call())
				}
				b.StopTimer()
				b.ReportMetric(benchkit.Micros(benchkit.Percentile(lat, 0.5)), "p50-µs")
				b.ReportMetric(benchkit.Micros(benchkit.Percentile(lat, 0.99)), "p99-µs")
				if c.dbURL != "" {
					// The statistics reach the view once a backend has been
					// idle a second.
					time.Sleep(2 * time.Second)
					b.ReportMetric(float64(dbTransactions(b, c.dbURL)-xacts0)/float64(len(lat)), "db-xacts/call")
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// measureFleet runs b.N calls from callers through c and reports calls/s
// and CPU per call.
func measureFleet(b *testing.B, c *cluster, callers int) {
	progress := make(chan struct{}, 1)
	run := startCallers(b, c, callers, progress)
	// Warm up (sessions copied to every replica, pools filled), then
	// measure the next b.N calls.
	run.waitCalls(b, progress, int64(2*callers), fleetStart)
	b.ResetTimer()
	startCalls := run.done.Load()
	postmaster := 0 // none on files
	if c.dbURL != "" {
		postmaster = postmasterOf(b, c.dbURL)
	}
	// The profiles (when the bench profiles) start before the counters
	// are read and stop after they are read again: their own work is
	// outside the CPU measured.
	stopProfiles := profileReplicas(b, c)
	replicas0, self0, pg0 := c.cpu(), benchkit.CPU(b), treeCPU(postmaster)
	haproxy0, _ := benchkit.ProcessCPU(c.proxy.Process.Pid)
	xacts0 := dbTransactions(b, c.dbURL)
	start := time.Now()
	run.waitCalls(b, progress, startCalls+int64(b.N), 10*time.Minute)
	elapsed := time.Since(start)
	calls := run.done.Load() - startCalls
	total, self, pg := c.cpu()-replicas0, benchkit.CPU(b)-self0, treeCPU(postmaster)-pg0
	haproxy1, _ := benchkit.ProcessCPU(c.proxy.Process.Pid)
	stopProfiles(calls, elapsed)
	b.StopTimer()
	run.finish()
	failed := 0
	for _, sc := range run.callers {
		for _, call := range sc.calls {
			if call.err != nil || call.hung || call.mismatch {
				failed++
			}
		}
	}
	if failed > 0 {
		b.Fatalf("%d calls failed", failed)
	}
	perCall := func(d time.Duration) float64 { return benchkit.Micros(d) / float64(calls) }
	haproxy := haproxy1 - haproxy0
	b.ReportMetric(float64(calls)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(perCall(total), "fleet-cpu-µs/call") // replicas, their demo servers, haproxy
	b.ReportMetric(perCall(total-haproxy), "replicas-cpu-µs/call")
	b.ReportMetric(perCall(haproxy), "haproxy-cpu-µs/call")
	b.ReportMetric(perCall(pg), "postgres-cpu-µs/call")
	b.ReportMetric(perCall(self), "callers-cpu-µs/call")
	if c.dbURL != "" {
		// The statistics reach the view once a backend has been idle a
		// second: the callers have stopped. What the last warm-up calls
		// and the callers' ends add is within the rounding.
		time.Sleep(2 * time.Second)
		b.ReportMetric(float64(dbTransactions(b, c.dbURL)-xacts0)/float64(calls), "db-xacts/call")
	}
	b.ReportMetric(0, "ns/op")
}

// When toolwire-bench profiles (-profile) it runs this benchmark with
// benchkit.ProfileDirEnv set, and with benchkit.OverlayEnv naming a go build overlay
// that adds its profiling hook to toolwire's main package (see
// internal/bench/profile.go): e2eBuild builds the replicas with it, and
// profileReplicas profiles each replica during the measured calls.

// profileReplicas starts a CPU profile of each of c's replicas (the
// hook's SIGUSR1) when the bench profiles, and returns what ends them
// (SIGUSR2), names them after the sub-benchmark and each replica, and
// adds them to the index; without profiling both do nothing.
func profileReplicas(b *testing.B, c *cluster) (stop func(calls int64, wall time.Duration)) {
	dir := os.Getenv(benchkit.ProfileDirEnv)
	if dir == "" || os.Getenv(benchkit.OverlayEnv) == "" {
		return func(int64, time.Duration) {}
	}
	before := benchkit.Files(dir)
	for _, r := range c.replicas {
		if err := r.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			b.Fatalf("start the profile of replica %s: %v", r.name, err)
		}
	}
	return func(calls int64, wall time.Duration) {
		// The row's name as the bench writes it: no '-', which parts a
		// profile's name; the process's role last.
		row := "fleet_" + strings.NewReplacer("store=", "", "replicas=", "r", "/", "_").Replace(strings.TrimPrefix(b.Name(), "BenchmarkFleetThroughput/"))
		files := []string{}
		for i, r := range c.replicas {
			if err := r.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
				b.Fatalf("end the profile of replica %s: %v", r.name, err)
			}
			got, err := benchkit.WaitProfile(dir, r.cmd.Process.Pid, before)
			if err != nil {
				b.Fatalf("replica %s: %v", r.name, err)
			}
			final := fmt.Sprintf("%s-c64-serve%d", row, i+1)
			from := strings.TrimSuffix(got, ".pprof")
			for _, suffix := range []string{".allocs-start.pb.gz", ".allocs.pb.gz", ".pprof"} {
				if err := os.Rename(filepath.Join(dir, from+suffix), filepath.Join(dir, final+suffix)); err != nil {
					b.Fatal(err)
				}
			}
			files = append(files, final+".pprof")
		}
		f, err := os.OpenFile(filepath.Join(dir, benchkit.FleetProfileIndex), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if _, err := fmt.Fprintf(f, "%s\t%d\t%d\t%s\n", row, calls, wall.Nanoseconds(), strings.Join(files, "\t")); err != nil {
			b.Fatal(err)
		}
	}
}

// postmasterOf finds the PID of the PostgreSQL server of dbURL: an
// internal/pgtest cluster in the temporary directory, by its port.
func postmasterOf(b *testing.B, dbURL string) int {
	u, err := url.Parse(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(os.TempDir(), "toolwire-pgtest-*", "data", "postmaster.pid"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(string(raw), "\n")
		if len(lines) > 3 && strings.TrimSpace(lines[3]) == u.Port() {
			if pid, err := strconv.Atoi(strings.TrimSpace(lines[0])); err == nil {
				return pid
			}
		}
	}
	b.Fatalf("no postmaster.pid of port %s under %s", u.Port(), os.TempDir())
	return 0
}

// treeCPU is the CPU time of pid and its descendants so far (processes
// that have exited are no longer counted); 0 for pid 0.
func treeCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	total, _ := benchkit.ProcessCPU(pid)
	kids, _ := benchkit.Descendants(pid)
	for _, k := range kids {
		d, _ := benchkit.ProcessCPU(k.PID)
		total += d
	}
	return total
}

// dbTransactions returns the transactions committed in dbURL's database
// so far (0 without one).
func dbTransactions(b *testing.B, dbURL string) int64 {
	if dbURL == "" {
		return 0
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
