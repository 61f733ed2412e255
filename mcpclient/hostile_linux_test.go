package mcpclient

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileServer is the server behind TOOLWIRE_TEST_SERVER=hostile: each of
// its tools tries something a confined server must not be able to do, and
// answers with the system's error when it fails, or says what it managed.
func hostileServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "0.0.1"}, nil)
	type args struct {
		Path string `json:"path"`
		Addr string `json:"addr"`
		URL  string `json:"url"`
		N    int    `json:"n"`
	}
	add := func(name string, try func(a args) (string, error)) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var a args
				if len(req.Params.Arguments) > 0 {
					if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
						return nil, err
					}
				}
				out, err := try(a)
				if err != nil {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: name + ": " + err.Error()}}}, nil
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil
			})
	}
	add("read", func(a args) (string, error) {
		data, err := os.ReadFile(a.Path)
		return fmt.Sprintf("read %d bytes", len(data)), err
	})
	add("write", func(a args) (string, error) {
		return "wrote " + a.Path, os.WriteFile(a.Path, []byte("written by a hostile server\n"), 0o600)
	})
	add("state", func(args) (string, error) {
		path := os.Getenv(stateDirEnv) + "/note"
		return "wrote " + path, os.WriteFile(path, []byte("mine\n"), 0o600)
	})
	add("connect", func(a args) (string, error) {
		c, err := net.DialTimeout("tcp", a.Addr, 5*time.Second)
		if err != nil {
			return "", err
		}
		c.Close()
		return "connected to " + a.Addr, nil
	})
	add("fetch", func(a args) (string, error) {
		proxy := http.ProxyFromEnvironment
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			// The test's TLS server has a certificate of its own.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
			Proxy: func(r *http.Request) (*url.URL, error) {
				// Go's client never proxies loopback addresses by itself.
				if u, _ := proxy(&http.Request{URL: &url.URL{Scheme: "https", Host: "example.com"}}); u != nil {
					return u, nil
				}
				return nil, nil
			}}}
		resp, err := client.Get(a.URL)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s", a.URL, resp.Status)
		}
		return "fetched " + a.URL, nil
	})
	add("fork", func(a args) (string, error) {
		made, err := forkMany(a.N)
		if err != nil {
			return "", fmt.Errorf("after %d processes: %w", made, err)
		}
		return fmt.Sprintf("made %d processes", made), nil
	})
	add("ptrace_parent", func(args) (string, error) {
		ppid := os.Getppid()
		// PTRACE_SEIZE does not stop the tracee, so a sandbox that failed
		// to refuse it would not freeze the test.
		const ptraceSeize = 0x4206
		if _, _, errno := syscall.RawSyscall6(syscall.SYS_PTRACE, ptraceSeize, uintptr(ppid), 0, 0, 0, 0); errno != 0 {
			return "", errno
		}
		_, _, _ = syscall.RawSyscall6(syscall.SYS_PTRACE, syscall.PTRACE_DETACH, uintptr(ppid), 0, 0, 0, 0)
		return fmt.Sprintf("attached to %d", ppid), nil
	})
	add("unshare", func(args) (string, error) {
		// The thread's namespaces change: it must not serve anything else.
		runtime.LockOSThread()
		if err := syscall.Unshare(syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS); err != nil {
			runtime.UnlockOSThread()
			return "", err
		}
		return "in new namespaces", nil
	})
	return srv
}

// forkMany makes up to n processes that exit at once and are reaped only
// at the end, so that all n exist together (a zombie still counts against
// the process limit).
func forkMany(n int) (made int, err error) {
	var pids []int
	defer func() {
		for _, pid := range pids {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, 0, nil)
		}
	}()
	for made < n {
		pid := rawFork()
		if pid < 0 {
			return made, syscall.Errno(-pid)
		}
		pids = append(pids, pid)
		made++
	}
	return made, nil
}

// rawFork forks; the child exits at once. It returns the child's pid, or
// minus the errno.
//
//go:norace
//go:nosplit
func rawFork() int {
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 {
		return -int(errno)
	}
	if pid == 0 {
		syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
	}
	return int(pid)
}
