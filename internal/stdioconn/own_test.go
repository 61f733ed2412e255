package stdioconn

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveSilently is a server written before MCP 2026-07-28 the way many
// hand-made ones are: a switch on the method that answers what it knows and
// ignores the rest without a word, server/discover included. It writes
// each method it reads to stderr, one a line. In mode "deafer" it ignores
// ping too (so it cannot be told from a server still starting); in mode "late" it answers server/discover, with "method not
// found", only once initialize has come, just before answering that.
func serveSilently(mode string) {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	var pendingDiscover json.RawMessage
	answer := func(id json.RawMessage, result any) {
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		os.Stdout.Write(append(out, '\n'))
	}
	for in.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &msg) != nil || msg.Method == "" {
			continue
		}
		fmt.Fprintln(os.Stderr, msg.Method)
		switch msg.Method {
		case "server/discover":
			if mode == "late" {
				pendingDiscover = msg.ID
			}
		case "ping":
			if mode != "deafer" {
				answer(msg.ID, map[string]any{})
			}
		case "initialize":
			if pendingDiscover != nil {
				os.Stdout.WriteString(`{"jsonrpc":"2.0","id":` + string(pendingDiscover) + `,"error":{"code":-32601,"message":"Method not found"}}` + "\n")
			}
			answer(msg.ID, map[string]any{
				"protocolVersion": "2025-11-25",
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "silent", "version": "1"},
			})
		case "tools/list":
			answer(msg.ID, map[string]any{"tools": []any{map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}}}})
		case "tools/call":
			answer(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": msg.Params.Arguments.Text}}})
		}
	}
	os.Exit(0)
}

// lockedBuffer is a bytes.Buffer safe for a child's stderr copier and a
// test reading it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestUnansweredDiscoverFallsBackToInitialize connects go-sdk's client,
// which opens with server/discover, to servers that never answer it: the
// Conn answers for them, the client falls back to initialize and the
// session works, whether the server answers the Conn's ping at once or
// answers server/discover late (the late answer is dropped).
func TestUnansweredDiscoverFallsBackToInitialize(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"silent", "late"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := childCommand(t, mode)
			stderr := &lockedBuffer{}
			cmd.Stderr = stderr
			client := mcp.NewClient(&mcp.Implementation{Name: "probe-test", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &CommandTransport{Command: cmd, DiscoverTimeout: 50 * time.Millisecond}, nil)
			if err != nil {
				t.Fatalf("Connect: %v; the server read:\n%s", err, stderr)
			}
			if got := cs.InitializeResult().ProtocolVersion; got != "2025-11-25" {
				t.Errorf("negotiated %q, want 2025-11-25 through initialize", got)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}})
			if err != nil {
				t.Fatalf("CallTool after the fallback: %v", err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != "still here" {
				t.Errorf("echo answered %q", got)
			}
			if err := cs.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			checkGone(t, cmd)
			// What the server read, in order: the probe, the ping behind it,
			// then the handshake.
			read := strings.Fields(stderr.String())
			want := []string{"server/discover", "ping", "initialize", "notifications/initialized", "tools/call"}
			if strings.Join(read, " ") != strings.Join(want, " ") {
				t.Errorf("the server read %q, want %q", read, want)
			}
		})
	}
}

// TestServerThatAnswersNothingIsNotAnsweredFor: a server that answers
// neither server/discover nor the ping behind it has not shown that it
// reads its input, and may be starting still: the Conn does not answer
// for it, however many times DiscoverTimeout passes, and the client waits
// for it until its own deadline.
func TestServerThatAnswersNothingIsNotAnsweredFor(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*50*time.Millisecond)
	defer cancel()
	cmd := childCommand(t, "deafer")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "probe-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &CommandTransport{Command: cmd, DiscoverTimeout: 10 * time.Millisecond, TerminateDuration: 100 * time.Millisecond}, nil)
	if err == nil {
		cs.Close()
		t.Fatalf("Connect succeeded; the server read %q", strings.Fields(stderr.String()))
	}
	if ctx.Err() == nil {
		t.Errorf("Connect failed before its deadline: %v", err)
	}
	checkGone(t, cmd)
	// The client's giving up may also send notifications/cancelled for
	// the probe; nothing else, and never an initialize.
	read := strings.Fields(stderr.String())
	if len(read) < 2 || strings.Join(read[:2], " ") != "server/discover ping" ||
		slices.ContainsFunc(read[2:], func(m string) bool { return m != "notifications/cancelled" }) {
		t.Errorf("the server read %q, want the probe and the ping (and at most cancellations)", read)
	}
}

// TestUnansweredDiscoverWithoutTheWatch shows what the watch is for: with
// it off, go-sdk's client waits for the silent server until its own
// deadline.
func TestUnansweredDiscoverWithoutTheWatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	cmd := childCommand(t, "silent")
	client := mcp.NewClient(&mcp.Implementation{Name: "probe-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &CommandTransport{Command: cmd, DiscoverTimeout: -1, TerminateDuration: 100 * time.Millisecond}, nil)
	if err == nil {
		cs.Close()
		t.Fatal("Connect succeeded with the watch off")
	}
	if ctx.Err() == nil {
		t.Errorf("Connect failed before its deadline: %v", err)
	}
}

// TestAnsweredDiscoverIsLeftAlone connects go-sdk's client through
// CommandTransport, with its default DiscoverTimeout, to go-sdk's server,
// which answers server/discover: the session is 2026-07-28's.
func TestAnsweredDiscoverIsLeftAlone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := childCommand(t, "stock-server")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe-test", Version: "1"}, nil).Connect(ctx, &CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != "2026-07-28" {
		t.Errorf("negotiated %q, want 2026-07-28", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "hi" {
		t.Errorf("CallTool: %v, %v", res, err)
	}
}

// slowStart is how long the "slow-server" child takes to start: well
// beyond ten times the DiscoverTimeout of TestSlowStartingServerSpeaks2026.
const slowStart = 600 * time.Millisecond

// TestSlowStartingServerSpeaks2026 connects to go-sdk's server, which
// speaks 2026-07-28, while it is still starting and answers nothing for
// many times the DiscoverTimeout: the Conn does not take its silence for
// "server/discover not supported" (the server would then answer the
// discover, dropped, and refuse the initialize behind it), and the session
// is 2026-07-28's once the server answers.
func TestSlowStartingServerSpeaks2026(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := childCommand(t, "slow-server")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe-test", Version: "1"}, nil).Connect(ctx,
		&CommandTransport{Command: cmd, DiscoverTimeout: 20 * time.Millisecond}, nil)
	if err != nil {
		t.Fatalf("Connect to a server that takes %s to start: %v", slowStart, err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != "2026-07-28" {
		t.Errorf("negotiated %q, want 2026-07-28", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "hi" {
		t.Errorf("CallTool: %v, %v", res, err)
	}
}

// connTransport is a CommandTransport that keeps the Conn it made.
type connTransport struct {
	CommandTransport
	conn *Conn
}

func (t *connTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.CommandTransport.Connect(ctx)
	if err == nil {
		t.conn = c.(*Conn)
	}
	return c, err
}

// TestCallBesideASession sends the Conn's own requests to a go-sdk server
// while a go-sdk session uses the same Conn: each gets its own answer, the
// session never sees them, and it goes on working.
func TestCallBesideASession(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ct := &connTransport{CommandTransport: CommandTransport{Command: childCommand(t, "stock-server")}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "call-test", Version: "1"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := fmt.Sprintf("own %d", i)
			params, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]any{"text": text}})
			resp, err := ct.conn.Call(ctx, "tools/call", params)
			if err != nil {
				t.Errorf("Call: %v", err)
				return
			}
			if resp.Error != nil || !strings.Contains(string(resp.Result), text) {
				t.Errorf("Call answered %s, %v; want a result holding %q", resp.Result, resp.Error, text)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "sdk"}})
			if err != nil || res.Content[0].(*mcp.TextContent).Text != "sdk" {
				t.Errorf("the session's own call: %v, %v", res, err)
			}
		}()
	}
	wg.Wait()
	resp, err := ct.conn.Call(ctx, "no/such/method", nil)
	if err != nil || resp.Error == nil {
		t.Errorf("Call of an unknown method: %v, %v; want the server's error in the response", resp, err)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := ct.conn.Call(ctx, "ping", nil); err == nil {
		t.Error("Call after Close succeeded")
	}
}
