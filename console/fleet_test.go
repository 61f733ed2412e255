package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/pgtest"
)

// TestApproveFromAnotherReplicasConsole: two replicas of a fleet on one
// PostgreSQL; a headless client's destructive call held by the first
// waits for an operator, who allows it in the second's console; the call
// completes on the first.
func TestApproveFromAnotherReplicasConsole(t *testing.T) {
	t.Parallel()
	db := pgtest.DB(t)
	holder, other := waitingFixture(t, db), waitingFixture(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if res, err := holder.callTool(ctx, "demo__write_note", map[string]any{"title": "fleet-note", "body": "b"}); err != nil || res.IsError {
		t.Fatalf("write_note: %v %v", res, err)
	}
	q := other.w.Pending()
	if q == nil {
		t.Fatal("the replica keeps no queue")
	}
	id, done := holder.waitingCall(ctx, q, "demo__delete_note", map[string]any{"title": "fleet-note"})
	c := other.client()
	other.signIn(c)
	_, page := other.get(c, "/approvals")
	if !strings.Contains(page, `id="call-`+id+`"`) {
		t.Fatalf("the other replica's console does not show call %s:\n%s", id, page)
	}
	csrf := other.csrfOf(c, "/approvals")
	resp := other.post(c, "/approvals/"+id, url.Values{"csrf": {csrf}, "decision": {"allow"}, "scope": {"once"}}, other.url)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals?done=allowed" {
		t.Fatalf("allow: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	r := <-done
	if r.err != nil || r.res.IsError {
		t.Fatalf("the allowed call on the holder: %v %q", r.err, resultText(r.res))
	}
	// Deciding again is refused, and says so.
	resp = other.post(c, "/approvals/"+id, url.Values{"csrf": {csrf}, "decision": {"deny"}}, other.url)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || (loc != "/approvals?done=decided" && loc != "/approvals?done=gone") {
		t.Errorf("deciding again: %s to %q", resp.Status, loc)
	}
}
