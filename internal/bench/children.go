//go:build unix

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/toolwire/toolwire/internal/bench/childhttp"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"
)

// The children: this binary run as "toolwire-bench child MODE [flags]".
// Each runs until its stdin reaches its end (the parent closed it or
// died), so that no child outlives the benchmark. HTTP children listen on
// 127.0.0.1:0 and print "LISTEN <url>" on stdout once they accept
// connections.
//
//	echo-pipe    the pipe floor: JSON-RPC lines on stdin, answers on stdout
//	echo-http    the HTTP floor: JSON-RPC POSTs at /mcp
//	relay-http   the relay floor: echo-http answering through an echo-pipe child
//	tools-http   an MCP server with -tools generated tools (listing.go)
//	sessions     opens -n MCP sessions to -url, prints READY, holds them (sessions.go)
//	otlp-sink    takes OTLP/HTTP exports (any POST) and drops them
func runChild(args []string) error {
	if len(args) == 0 {
		return errors.New("missing mode")
	}
	mode, args := args[0], args[1:]
	switch mode {
	case "echo-pipe":
		return servePipeEcho(os.Stdin, os.Stdout)
	case "echo-http":
		return childhttp.Serve(echoHandler(func(_ context.Context, req *rpcRequest) ([]byte, error) { return answer(req) }))
	case "relay-http":
		return serveRelay()
	case "tools-http":
		return serveTools(args)
	case "sessions":
		return holdSessions(args)
	case "otlp-sink":
		// Takes OTLP/HTTP exports and drops them: an empty body is an
		// empty Export*ServiceResponse, which says all was accepted.
		return childhttp.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
		}))
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// servePipeEcho answers each JSON-RPC line of r with one line on w, until
// r ends.
func servePipeEcho(r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var req rpcRequest
		if err := json.Unmarshal(line, &req); err != nil {
			return fmt.Errorf("decoding request: %w", err)
		}
		out, err := answer(&req)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(out, '\n')); err != nil {
			return err
		}
	}
}

// echoHandler serves JSON-RPC POSTs at /mcp, answering each decoded
// request with what respond returns.
func echoHandler(respond func(context.Context, *rpcRequest) ([]byte, error)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req rpcRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := respond(r.Context(), &req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
	return mux
}

// serveRelay is echo-http whose answers come from an echo-pipe child, the
// request decoded here, re-encoded to the child, its answer decoded and
// re-encoded for the caller: a gateway with nothing else to do.
func serveRelay() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "child", "echo-pipe")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	childAttrs(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	// The echo child ends when its stdin closes; the parent benchmark also
	// knows it by PID and kills it should it outlive this process.
	defer func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(endGrace):
			_ = cmd.Process.Kill()
		}
	}()
	up := newPipeClient(stdout, stdin)
	return childhttp.Serve(echoHandler(func(ctx context.Context, req *rpcRequest) ([]byte, error) {
		id := req.ID
		resp, err := up.roundTrip(ctx, req)
		if err != nil {
			return nil, err
		}
		resp.ID = id
		return json.Marshal(resp)
	}))
}

// childFlags parses a child's flags, failing on any error.
func childFlags(name string, args []string, define func(fs *flag.FlagSet)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	define(fs)
	return fs.Parse(args)
}
