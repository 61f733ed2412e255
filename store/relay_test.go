package store

import (
	"bytes"
	"context"
	"errors"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/internal/pgtest"
)

const relayWait = 30 * time.Second

// TestRelayPassesARequestToTheHolder: what one instance holds, another
// finds; its request reaches the holder's handler, whose events arrive in
// order before its reply; a handler's error comes back as an error; a
// caller that gives up cancels the handler; a released key is held by
// nobody.
func TestRelayPassesARequestToTheHolder(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a, b := openPG(t, url, nil).Relay(), openPG(t, url, nil).Relay()
	ctx, cancel := context.WithTimeout(context.Background(), relayWait)
	defer cancel()

	release, err := a.Hold(ctx, "call", "c-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if holder, err := b.Holder(ctx, "call", "c-1"); err != nil || holder != a.Instance() {
		t.Fatalf("holder of c-1 seen from b: %q, %v; want %s", holder, err, a.Instance())
	}
	a.Handle("echo", func(_ context.Context, body []byte, emit func([]byte)) ([]byte, error) {
		for i := range 3 {
			emit([]byte(strconv.Itoa(i)))
		}
		if string(body) == "fail" {
			return nil, errors.New("refused: fail")
		}
		return append([]byte("echo "), body...), nil
	})
	var events []string
	reply, err := b.Call(ctx, a.Instance(), "echo", []byte("hi"), func(ev []byte) { events = append(events, string(ev)) })
	if err != nil || string(reply) != "echo hi" || strings.Join(events, ",") != "0,1,2" {
		t.Errorf("call: %q, %v, events %q; want the reply after the events in order", reply, err, events)
	}
	if _, err := b.Call(ctx, a.Instance(), "echo", []byte("fail"), nil); err == nil || err.Error() != "refused: fail" {
		t.Errorf("a handler's error: %v", err)
	}
	if _, err := b.Call(ctx, a.Instance(), "nothing", nil, nil); err == nil || !strings.Contains(err.Error(), `serves no "nothing"`) {
		t.Errorf("a method nobody serves: %v", err)
	}

	entered, cancelled := handleWait(a)
	callCtx, giveUp := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.Call(callCtx, a.Instance(), "wait", nil, nil)
		done <- err
	}()
	<-entered
	giveUp()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("a call given up: %v, want context.Canceled", err)
	}
	select {
	case <-cancelled:
	case <-ctx.Done():
		t.Fatal("the handler of a call given up was not cancelled")
	}

	release()
	if holder, err := b.Holder(ctx, "call", "c-1"); err != nil || holder != "" {
		t.Errorf("holder of a released key: %q, %v; want none", holder, err)
	}
}

// A request whose statement committed while its caller could not learn
// so (the connection broke, or the caller's context ended, between the
// commit and its answer) reached the holder's handler all the same: the
// caller tells the holder it gave up, and the handler's context ends.
// (This was a flaky failure of the test above: the caller gave up while
// its request was being written, and only a later give-up was told.)
func TestRelayAbandonsARequestWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a := openPG(t, url, nil).Relay()
	// b's connections pass through a proxy that drops the answer to the
	// statement writing a "wait" request, and the connection with it.
	b := openPG(t, cutAnswerProxy(t, url, []byte(`"m":"wait"`)), nil).Relay()
	ctx, cancel := context.WithTimeout(context.Background(), relayWait)
	defer cancel()

	entered, cancelled := handleWait(a)
	if _, err := b.Call(ctx, a.Instance(), "wait", nil, nil); err == nil || ctx.Err() != nil {
		t.Fatalf("a call whose request's answer was lost: %v; want an error at once", err)
	}
	for _, c := range []struct {
		what string
		ch   chan struct{}
	}{{"reached", entered}, {"was cancelled", cancelled}} {
		select {
		case <-c.ch:
		case <-ctx.Done():
			t.Fatalf("the handler of a request whose answer was lost never %s", c.what)
		}
	}
}

// An abandon may commit before the request it abandons (see Relay.Call):
// that request is then never served, and the abandon is forgotten. A call
// given up before its request could be sent sends no abandon either.
func TestRelayDropsARequestAbandonedBeforeItCame(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a, b := openPG(t, url, nil).Relay(), openPG(t, url, nil).Relay()
	ctx, cancel := context.WithTimeout(context.Background(), relayWait)
	defer cancel()
	a.Handle("wait", func(ctx context.Context, _ []byte, _ func([]byte)) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	a.Handle("echo", func(_ context.Context, body []byte, _ func([]byte)) ([]byte, error) { return body, nil })
	to, err := strconv.Atoi(a.Instance())
	if err != nil {
		t.Fatal(err)
	}
	const id = "given-up-early"
	for _, env := range []envelope{
		{Kind: "abandon", ID: id, From: b.me()},
		{Kind: "req", ID: id, From: b.me(), Method: "wait"},
	} {
		if err := b.send(ctx, int32(to), env); err != nil {
			t.Fatal(err)
		}
	}
	given, giveUp := context.WithCancel(ctx)
	giveUp()
	if _, err := b.Call(given, a.Instance(), "wait", nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call given up before it was sent: %v, want context.Canceled", err)
	}
	// a takes its messages in order: once a later call is answered, it
	// has seen the abandon and the request.
	if reply, err := b.Call(ctx, a.Instance(), "echo", []byte("after"), nil); err != nil || string(reply) != "after" {
		t.Fatalf("a later call: %q, %v", reply, err)
	}
	key := b.Instance() + "/" + id
	a.mu.Lock()
	_, served := a.serving[key]
	_, remembered := a.abandoned[key]
	a.mu.Unlock()
	if served || remembered {
		t.Errorf("a request abandoned before it came: served %v, its abandon still remembered %v; want neither", served, remembered)
	}
	a.mu.Lock()
	left := len(a.abandoned)
	a.mu.Unlock()
	if left != 0 {
		t.Errorf("%d abandons remembered, want none (a call given up before it was sent abandons nothing)", left)
	}
}

// handleWait serves "wait" on r: a handler that signals entered, waits
// until its context ends, signals cancelled and returns. One call only.
func handleWait(r *Relay) (entered, cancelled chan struct{}) {
	entered, cancelled = make(chan struct{}), make(chan struct{})
	r.Handle("wait", func(ctx context.Context, _ []byte, _ func([]byte)) ([]byte, error) {
		close(entered)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	})
	return entered, cancelled
}

// cutAnswerProxy returns the URL of dbURL's database through a proxy on
// 127.0.0.1 that, the first time a client writes bytes containing match,
// passes them on, reads the server's answer, and closes both sides
// without passing the answer back: the statement ran, and its client
// cannot know.
func cutAnswerProxy(t *testing.T, dbURL string, match []byte) string {
	t.Helper()
	u, err := neturl.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var done sync.WaitGroup
	t.Cleanup(func() { ln.Close(); done.Wait() })
	var matched atomic.Bool
	target := u.Host
	done.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			var cut atomic.Bool // set before the matching bytes go on
			closeBoth := func() { client.Close(); server.Close() }
			done.Go(func() {
				defer closeBoth()
				buf := make([]byte, 64<<10)
				for {
					n, err := client.Read(buf)
					if n > 0 && bytes.Contains(buf[:n], match) && matched.CompareAndSwap(false, true) {
						cut.Store(true)
					}
					if n > 0 {
						if _, werr := server.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
			done.Go(func() {
				defer closeBoth()
				buf := make([]byte, 64<<10)
				for {
					n, err := server.Read(buf)
					if n > 0 && cut.Load() {
						return // the answer, dropped
					}
					if n > 0 {
						if _, werr := client.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	u.Host = ln.Addr().String()
	return u.String()
}

// TestRelayFindsALostInstanceAndRecoversIt: an instance whose process ends
// (its connections go) while another waits on its reply: the wait ends at
// once with an error that says the instance is lost, the key it held has
// no holder, and every call it recorded as requested without an outcome
// gets one (call.errored, instance_lost) exactly once, however many
// instances look.
func TestRelayFindsALostInstanceAndRecoversIt(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	lost, b := openPG(t, url, nil), openPG(t, url, nil)
	b.grace = 200 * time.Millisecond // the claims' grace, short for the test
	b.Replica()
	ctx, cancel := context.WithTimeout(context.Background(), relayWait)
	defer cancel()

	// The lost instance's record: one call that ended, one still open.
	sink := lost.Audit()
	for _, ev := range []audit.Event{
		{Kind: audit.CallRequested, Batch: "b-1", Index: 0, Tool: "demo__echo", Caller: "alice"},
		{Kind: audit.CallExecuted, Batch: "b-1", Index: 0, Tool: "demo__echo"},
		{Kind: audit.CallRequested, Batch: "b-2", Index: 1, Tool: "demo__write_note", Caller: "bob"},
	} {
		ev.Time = time.Now()
		if err := sink.Write(&ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lost.Relay().Hold(ctx, "call", "c-2", time.Minute); err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	lost.Relay().Handle("wait", func(ctx context.Context, _ []byte, _ func([]byte)) ([]byte, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	// Every instance is told when one is recovered.
	recovered := make(chan struct{})
	defer b.listener.watch(fleetChannel, func(payload string) {
		if payload == lostPrefix+lost.Relay().Instance() {
			close(recovered)
		}
	})()
	done := make(chan error, 1)
	go func() {
		_, err := b.Relay().Call(ctx, lost.Relay().Instance(), "wait", nil, nil)
		done <- err
	}()
	<-entered
	// The process's end, as the database sees it: its connection that
	// holds the lock goes, never to come back, and so do the others.
	lost.listener.close()
	lost.pool.Reset()
	var lerr interface{ ReplicaLost() bool }
	select {
	case err := <-done:
		if !errors.As(err, &lerr) || !lerr.ReplicaLost() || !strings.Contains(err.Error(), "is gone") {
			t.Errorf("the wait on a lost instance: %v; want an error saying it is lost", err)
		}
	case <-ctx.Done():
		t.Fatal("the wait on a lost instance did not end")
	}
	if _, err := b.Relay().Holder(ctx, "call", "c-2"); !errors.As(err, &lerr) && err != nil {
		t.Errorf("holder of the lost instance's key: %v", err)
	}

	// Recovered once: by b (it found the instance lost), and not again by
	// an instance starting now.
	outcomes := func() []audit.Event {
		t.Helper()
		var out []audit.Event
		for _, ev := range auditRows(t, url) {
			if ev.Kind == audit.CallErrored && ev.Reason == ReasonInstanceLost {
				out = append(out, ev)
			}
		}
		return out
	}
	select {
	case <-recovered:
	case <-ctx.Done():
		t.Fatal("the lost instance was not recovered")
	}
	third := openPG(t, url, nil)
	if _, err := third.recoverLost(ctx); err != nil {
		t.Fatal(err)
	}
	got := outcomes()
	if len(got) != 1 || got[0].Batch != "b-2" || got[0].Index != 1 || got[0].Tool != "demo__write_note" || got[0].Caller != "bob" {
		t.Errorf("outcomes given to the lost instance's calls: %+v; want one, for the open call b-2/1", got)
	}
	if holder, err := b.Relay().Holder(ctx, "call", "c-2"); err != nil || holder != "" {
		t.Errorf("holder of the recovered instance's key: %q, %v; want none", holder, err)
	}
	if _, err := third.VerifyAudit(ctx, nil); err != nil {
		t.Errorf("the audit chain after the recovery: %v", err)
	}
}

// auditRows returns the audit table's events in order.
func auditRows(t *testing.T, url string) []audit.Event {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT line FROM toolwire.audit_events ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]audit.Event, len(lines))
	for i, l := range lines {
		if err := out[i].UnmarshalJSON(l); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Issue 22.1: a message goes only to a running instance. A Call to an
// instance that never existed, or that ended, fails at once as lost with
// nothing written to the mailbox and nobody recovered; and what is left
// in the mailbox for instances that are gone, or waited longer than a
// message may, is pruned.
func TestRelaySendsOnlyToRunningInstances(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a, gone := openPG(t, url, nil), openPG(t, url, nil)
	goneID := gone.Relay().Instance()
	gone.Close()
	ctx, cancel := context.WithTimeout(context.Background(), relayWait)
	defer cancel()
	var lerr interface{ ReplicaLost() bool }
	for _, to := range []string{"987654", goneID} {
		for range 20 {
			_, err := a.Relay().Call(ctx, to, "session.reply", make([]byte, 64<<10), nil)
			if !errors.As(err, &lerr) || !lerr.ReplicaLost() {
				t.Fatalf("a call to instance %s, not running: %v; want an error saying it is gone", to, err)
			}
		}
	}
	if n := sql(t, url, "SELECT 1 FROM toolwire.mailbox"); n != 0 {
		t.Errorf("%d messages written for instances that are not running, want none", n)
	}
	if n := sql(t, url, "SELECT 1 FROM toolwire.instances WHERE recovered_at IS NOT NULL"); n != 0 {
		t.Errorf("%d instances recovered, want none (one never was, one ended)", n)
	}

	// What a race could leave: a message for an instance that is gone,
	// and one for a running instance that waited too long. Pruned; a
	// fresh one for a running instance is not.
	b := openPG(t, url, nil)
	sql(t, url, "INSERT INTO toolwire.mailbox (recipient, body) VALUES (987654, 'x'), ($1, 'y')", goneID)
	sql(t, url, "INSERT INTO toolwire.mailbox (recipient, body, sent_at) VALUES ($1, 'old', now() - interval '11 minutes')", b.Relay().Instance())
	b.Relay().close() // b reads no more messages
	sql(t, url, "INSERT INTO toolwire.mailbox (recipient, body) VALUES ($1, 'fresh')", b.Relay().Instance())
	if _, err := a.Relay().prune(ctx); err != nil {
		t.Fatalf("prune: %v", err)
	}
	if n := sql(t, url, "SELECT 1 FROM toolwire.mailbox WHERE body <> 'fresh'"); n != 0 {
		t.Errorf("%d messages of instances that are gone, or too old, left after a prune; want none", n)
	}
	if n := sql(t, url, "SELECT 1 FROM toolwire.mailbox WHERE body = 'fresh'"); n != 1 {
		t.Errorf("the fresh message of a running instance was pruned")
	}
}

// Issue 22.23: a command that only changes state (a store opened and
// never made a replica) recovers nobody, and a replica does not take for
// lost an instance whose lock is free but which was seen within the
// claim's grace (by the database's clock): it may be reconnecting. Once
// the grace has passed, and the replica's own claim is older than it, the
// instance is recovered.
func TestOnlyAReplicaRecoversAndNotWithinTheGrace(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	ctx, cancel := context.WithTimeout(context.Background(), relayWait)
	defer cancel()
	a, b := openPG(t, url, nil), openPG(t, url, nil)
	a.Replica()
	// b's claim goes (its listening connection, with its lock), as in an
	// outage of the database, and does not come back in this test.
	b.listener.close()
	if err := b.Claim(); err == nil {
		t.Errorf("b's claim after its listener closed: nil, want an error")
	}
	recovered := func() bool {
		t.Helper()
		return sql(t, url, "SELECT 1 FROM toolwire.instances WHERE id = $1 AND recovered_at IS NOT NULL", b.instance.Load()) == 1
	}
	// An operator's command, run now: it opens the store, changes state,
	// closes (waiting for whatever it started).
	cmd := openPG(t, url, nil)
	if ok, err := cmd.recoverInstance(ctx, b.instance.Load()); ok || err != nil {
		t.Errorf("a command's recovery of b: %v, %v; want none", ok, err)
	}
	cmd.Close()
	if recovered() {
		t.Fatal("b was taken for lost by a command")
	}
	// A replica, within the grace.
	if ok, err := a.recoverInstance(ctx, b.instance.Load()); ok || err != nil || recovered() {
		t.Errorf("a replica's recovery of b seen within the grace: %v, %v; want none", ok, err)
	}
	// The grace has passed for b, but not for a's own claim (it came back
	// a moment ago, as after an outage): still not.
	sql(t, url, "UPDATE toolwire.instances SET seen_at = now() - interval '11 seconds' WHERE id = $1", b.instance.Load())
	sql(t, url, "UPDATE toolwire.instances SET claimed_at = now() WHERE id = $1", a.instance.Load())
	if ok, err := a.recoverInstance(ctx, b.instance.Load()); ok || err != nil || recovered() {
		t.Errorf("the recovery of b by a replica whose own claim is new: %v, %v; want none", ok, err)
	}
	sql(t, url, "UPDATE toolwire.instances SET claimed_at = now() - interval '11 seconds' WHERE id = $1", a.instance.Load())
	if ok, err := a.recoverInstance(ctx, b.instance.Load()); !ok || err != nil || !recovered() {
		t.Errorf("the recovery of b unseen for longer than the grace: %v, %v; want it recovered", ok, err)
	}
}

// Issue 22.11: a store's claim goes with its listening connection and
// comes back with it: the heartbeat keeps seen_at fresh meanwhile, and a
// reconnection restarts claimed_at.
func TestTheClaimFollowsTheListeningConnection(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a := openPG(t, url, nil)
	if err := a.Claim(); err != nil {
		t.Fatalf("a fresh store's claim: %v", err)
	}
	sql(t, url, "UPDATE toolwire.instances SET seen_at = now() - interval '1 hour', claimed_at = now() - interval '1 hour' WHERE id = $1", a.instance.Load())
	// The heartbeat confirms the claim within a few seconds.
	deadline := time.Now().Add(relayWait)
	for sql(t, url, "SELECT 1 FROM toolwire.instances WHERE id = $1 AND seen_at > now() - interval '1 minute'", a.instance.Load()) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat did not confirm the claim")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := sql(t, url, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'
	AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2 AND mode = 'ExclusiveLock' AND granted`,
		int64(instanceLockClass), int64(a.instance.Load())); n != 1 {
		t.Fatalf("terminated %d connections holding the lock, want 1", n)
	}
	for sql(t, url, "SELECT 1 FROM toolwire.instances WHERE id = $1 AND claimed_at > now() - interval '1 minute'", a.instance.Load()) != 1 || a.Claim() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the claim did not come back after a reconnection: %v", a.Claim())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Issue 22.10: after an outage of the database, the store says it can be
// used (Ping, which readiness asks) only once its listener is back: a
// change announced the moment Ping succeeds reaches its watchers as
// itself, not only as the "check everything" of a reconnection.
func TestReadyOnlyOnceTheListenerIsBack(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a := openPG(t, url, nil)
	heard := make(chan string, 64)
	defer a.listener.watch(pinsChannel, func(p string) {
		select {
		case heard <- p:
		default:
		}
	})()
	ctx, cancel := context.WithTimeout(context.Background(), relayWait)
	defer cancel()
	allow := pgtest.Outage(t, url)
	for a.Ping(ctx) == nil {
		if ctx.Err() != nil {
			t.Fatal("the store still says it can be used with the database refusing connections")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Long enough for the listener's backoff to grow past a second.
	time.Sleep(2 * time.Second)
	allow()
	for a.Ping(ctx) != nil {
		if ctx.Err() != nil {
			t.Fatal("the store did not come back")
		}
		time.Sleep(5 * time.Millisecond)
	}
	sql(t, url, "SELECT pg_notify($1, 'changed-at-ready')", pinsChannel)
	for {
		select {
		case p := <-heard:
			if p == "changed-at-ready" {
				return
			}
		case <-ctx.Done():
			t.Fatal("a change announced when the store said it was ready again never reached its watchers")
		}
	}
}

// adminConn connects to the cluster of url's database (its postgres
// database) and returns the connection and the database's name.
func adminConn(t *testing.T, dbURL string) (*pgx.Conn, string) {
	t.Helper()
	u, err := neturl.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	c, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c, name
}
