package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/internal/safetext"
)

// The headers of a webhook's POST: the time it was signed (Unix seconds)
// and the signature, "v1=" and the hex HMAC-SHA256, under the shared
// secret, of the timestamp, ".", and the body. A receiver recomputes the
// signature over the bytes it received, compares it in constant time, and
// refuses a timestamp more than a few minutes old (a replay).
const (
	WebhookTimestampHeader = "X-Toolwire-Timestamp"
	WebhookSignatureHeader = "X-Toolwire-Signature"
)

// Webhook tells someone that a call waits for an operator: an HTTP POST
// of the pending request to URL, shaped as a chat incoming-webhook's
// message (see [WebhookMessage]), signed with Secret (see
// [WebhookSignatureHeader]). Its zero Attempts and Client mean 3 and a
// client with a 10 s timeout. Notify never blocks the call.
type Webhook struct {
	URL    string
	Secret []byte
	// Attempts bounds the POSTs of one request: a network error or a 5xx
	// answer is tried again (after 1 s, 2 s, ...), a 4xx is not.
	Attempts int
	Client   *http.Client
}

// WebhookMessage is the body of a webhook's POST: Text for a chat to show
// as it is, the request for a program to read, and the link to its
// approval page ("" when the gateway has none: a call that did not come
// over HTTP).
type WebhookMessage struct {
	Text    string           `json:"text"`
	Request approval.Request `json:"request"`
	URL     string           `json:"url,omitempty"`
}

// Notify posts r, with link to its page, in the background: at most
// Attempts times, until the request's deadline; a failure is logged
// (without the secret), never returned.
func (w *Webhook) Notify(r approval.Request, link string, logger *slog.Logger) {
	body, err := json.Marshal(WebhookMessage{Text: webhookText(r, link), Request: r, URL: link})
	if err != nil {
		logger.Error("approval webhook: the request could not be encoded", "approval", r.ID, "error", err.Error())
		return
	}
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), r.Deadline)
		defer cancel()
		if err := w.post(ctx, body); err != nil {
			logger.Warn("approval webhook: nobody was told of the call waiting for an operator", "approval", r.ID, "error", err.Error())
		}
	}()
}

// post sends body until it is taken, a 4xx refuses it, the attempts are
// spent or ctx ends.
func (w *Webhook) post(ctx context.Context, body []byte) error {
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	attempts := w.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	var last error
	for i := range attempts {
		if i > 0 {
			t := time.NewTimer(time.Duration(1<<(i-1)) * time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%w (after %d attempts; the last: %v)", ctx.Err(), i, last)
			case <-t.C:
			}
		}
		retry, err := w.send(ctx, client, body, time.Now())
		if err == nil {
			return nil
		}
		last = err
		if !retry {
			return err
		}
	}
	return fmt.Errorf("%d attempts failed; the last: %w", attempts, last)
}

// send posts body once and says whether a failure is worth another try.
func (w *Webhook) send(ctx context.Context, client *http.Client, body []byte, at time.Time) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return false, errors.New("the webhook URL does not parse") // not said: it may be a secret
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolwire-approvals")
	req.Header.Set(WebhookTimestampHeader, ts)
	req.Header.Set(WebhookSignatureHeader, WebhookSignature(w.Secret, ts, body))
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may be a secret (a chat's webhook)
		}
		return ctx.Err() == nil, fmt.Errorf("POST: %w", err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return true, fmt.Errorf("POST: %s", resp.Status)
	}
	return false, fmt.Errorf("POST: %s (not tried again)", resp.Status)
}

// WebhookSignature returns the value of [WebhookSignatureHeader] for body
// sent at timestamp ts (Unix seconds, as in [WebhookTimestampHeader])
// under secret: what a receiver computes to check a POST.
func WebhookSignature(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// webhookText is the message a chat shows: what waits, for whom, until
// when, and how to decide it. The names in it are the caller's and the
// servers' words: single lines, bounded, and without the characters a
// chat's markup gives a meaning (<, >, & make links and mentions in
// Slack's).
func webhookText(r approval.Request, link string) string {
	clean := func(s string) string {
		s = safetext.Line(s, 128)
		return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "toolwire: a %s call to %s", clean(r.Tier), clean(r.Tool))
	if r.Caller != "" {
		fmt.Fprintf(&b, " by %s", clean(r.Caller))
	}
	fmt.Fprintf(&b, " waits for approval until %s UTC (approval %s).", r.Deadline.UTC().Format(time.TimeOnly), r.ID)
	if link != "" {
		fmt.Fprintf(&b, " Decide at %s", link)
		b.WriteString(" or with")
	} else {
		b.WriteString(" Decide with")
	}
	fmt.Fprintf(&b, " `toolwire approvals approve %s` or `toolwire approvals deny %s`.", r.ID, r.ID)
	return b.String()
}
