//go:build unix

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
)

// The floors: the least a JSON-RPC peer can do for the same call, with no
// MCP library. Messages have the shape of the echo tools/call and its
// result, and both sides encode and decode them with encoding/json into
// small structs; every message is written with its own write, as the
// stacks under test do.

// echoText is what every call sends and expects back.
const echoText = "hello"

// echoArgs is the echo tool's arguments, the same bytes for every row.
var echoArgs = json.RawMessage(`{"text":"hello"}`)

type rpcRequest struct {
	JSONRPC string     `json:"jsonrpc"`
	ID      int64      `json:"id"`
	Method  string     `json:"method"`
	Params  callParams `json:"params"`
}

type callParams struct {
	Name      string   `json:"name"`
	Arguments echoArgv `json:"arguments"`
}

type echoArgv struct {
	Text string `json:"text"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      int64           `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type callResult struct {
	Content []textContent `json:"content"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func newEchoRequest(id int64) *rpcRequest {
	return &rpcRequest{JSONRPC: "2.0", ID: id, Method: "tools/call",
		Params: callParams{Name: "echo", Arguments: echoArgv{Text: echoText}}}
}

// answer is the floor servers' whole work on a decoded request.
func answer(req *rpcRequest) ([]byte, error) {
	result, err := json.Marshal(callResult{Content: []textContent{{Type: "text", Text: req.Params.Arguments.Text}}})
	if err != nil {
		return nil, err
	}
	return json.Marshal(rpcResponse{JSONRPC: "2.0", ID: req.ID, Result: result})
}

// checkEcho decodes a response's result and checks that it echoes echoText.
func checkEcho(resp *rpcResponse) error {
	if resp.Error != nil {
		return fmt.Errorf("echo: error %d: %s", resp.Error.Code, resp.Error.Message)
	}
	var res callResult
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return fmt.Errorf("echo: decoding result: %w", err)
	}
	if len(res.Content) != 1 || res.Content[0].Text != echoText {
		return fmt.Errorf("echo: unexpected result %s", resp.Result)
	}
	return nil
}

// pipeClient makes JSON-RPC calls over a pair of pipes, one line per
// message, any number of them at once. A reader goroutine, started by
// newPipeClient, hands each response to its caller by ID; it stops when r
// reaches its end or fails (the child has exited or closed its stdout),
// and then every waiting and later call fails with that error.
type pipeClient struct {
	wmu sync.Mutex
	w   io.Writer

	next atomic.Int64

	mu      sync.Mutex
	pending map[int64]chan *rpcResponse
	err     error // why the reader stopped; set once
}

func newPipeClient(r io.Reader, w io.Writer) *pipeClient {
	c := &pipeClient{w: w, pending: map[int64]chan *rpcResponse{}}
	go c.read(r)
	return c
}

func (c *pipeClient) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	var err error
	for {
		var line []byte
		if line, err = br.ReadBytes('\n'); err != nil {
			break
		}
		resp := new(rpcResponse)
		if err = json.Unmarshal(line, resp); err != nil {
			err = fmt.Errorf("decoding response: %w", err)
			break
		}
		c.mu.Lock()
		ch := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- resp
		}
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("pipe closed")
	}
	c.mu.Lock()
	c.err = err
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// roundTrip sends req under a fresh ID (req.ID is overwritten) and returns
// the response.
func (c *pipeClient) roundTrip(ctx context.Context, req *rpcRequest) (*rpcResponse, error) {
	req.ID = c.next.Add(1)
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	line = append(line, '\n')
	ch := make(chan *rpcResponse, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.pending[req.ID] = ch
	c.mu.Unlock()
	c.wmu.Lock()
	_, err = c.w.Write(line)
	c.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			c.mu.Lock()
			defer c.mu.Unlock()
			return nil, c.err
		}
		return resp, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, req.ID)
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// startPipeChild starts "toolwire-bench child echo-pipe" owned by procs
// and returns a client for it.
func startPipeChild(procs *procSet, self, name string) (*pipeClient, *proc, error) {
	cmd := exec.Command(self, "child", "echo-pipe")
	cmd.Env = childEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	p, err := procs.start(name, cmd, false)
	if err != nil {
		return nil, nil, err
	}
	return newPipeClient(stdout, p.stdin), p, nil
}

func openFloorPipe(ctx context.Context, b *bench) (*target, error) {
	c, p, err := startPipeChild(b.procs, b.self, "floor-pipe")
	if err != nil {
		return nil, err
	}
	return &target{
		call: func(ctx context.Context) error {
			resp, err := c.roundTrip(ctx, newEchoRequest(0))
			if err != nil {
				return withTail(err, p.tail)
			}
			return checkEcho(resp)
		},
		pids:  []int{p.pid()},
		close: func() {},
	}, nil
}

// listenRE matches the line on which this binary's children announce
// their URL.
var listenRE = regexp.MustCompile(`^LISTEN (http://\S+)$`)

// startHTTPChild starts "toolwire-bench child MODE" and waits (bounded) for
// its URL.
func startHTTPChild(ctx context.Context, b *bench, name string, args ...string) (string, *proc, error) {
	cmd := exec.Command(b.self, append([]string{"child"}, args...)...)
	cmd.Env = childEnv()
	return startListening(ctx, b, name, cmd)
}

// startListening starts cmd, which announces its URL as the children do
// ("LISTEN <url>" on stdout) and ends when its stdin closes, and waits
// (bounded) for the URL.
func startListening(ctx context.Context, b *bench, name string, cmd *exec.Cmd) (string, *proc, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	p, err := b.procs.start(name, cmd, false)
	if err != nil {
		return "", nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	url, err := waitLine(wctx, stdout, listenRE, nil)
	if err != nil {
		return "", nil, withTail(fmt.Errorf("%s: %w", name, err), p.tail)
	}
	return url, p, nil
}

// httpEcho makes one echo call as a JSON POST.
func httpEcho(ctx context.Context, client *http.Client, url string, id int64) error {
	body, err := json.Marshal(newEchoRequest(id))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("echo: HTTP %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	var r rpcResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("echo: decoding response: %w", err)
	}
	return checkEcho(&r)
}

func openFloorHTTP(ctx context.Context, b *bench) (*target, error) {
	return openHTTPFloor(ctx, b, "floor-http", "echo-http")
}

// openFloorRelay is floor-http's child forwarding every call over a pipe
// to a floor-pipe grandchild: the least a gateway does.
func openFloorRelay(ctx context.Context, b *bench) (*target, error) {
	return openHTTPFloor(ctx, b, "floor-relay", "relay-http")
}

func openHTTPFloor(ctx context.Context, b *bench, name, mode string) (*target, error) {
	url, p, err := startHTTPChild(ctx, b, name, mode)
	if err != nil {
		return nil, err
	}
	var id atomic.Int64
	return &target{
		call: func(ctx context.Context) error {
			return httpEcho(ctx, b.httpClient, url, id.Add(1))
		},
		pids:  append([]int{p.pid()}, b.procs.adoptDescendants(p.pid())...),
		close: func() {},
	}, nil
}
