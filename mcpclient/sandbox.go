package mcpclient

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/sandbox"
)

// SandboxOptions says how stdio servers are confined (see package
// sandbox and docs/security.md). The zero value confines every stdio
// server where the system can, through this program's own executable.
type SandboxOptions struct {
	// Mode is config.SandboxOn (""), config.SandboxRequired (refuse to
	// start a server that cannot be confined as configured) or
	// config.SandboxOff (confine none). A server's own "sandbox: off"
	// overrides it.
	Mode string
	// Launcher is the executable that confines a server and then execs
	// it: any program that links package sandbox (mcpclient does). ""
	// means os.Executable.
	Launcher string
	// StateDir holds each server's own writable directory, named after
	// the server. "" means $XDG_STATE_HOME/toolwire/servers, or
	// ~/.local/state/toolwire/servers.
	StateDir string
	// Kernel, when set, is taken as what the kernel offers, as far as the
	// kernel does offer it: it can take features away (to see what a
	// server gets on an older kernel), never add them.
	Kernel *sandbox.Kernel
}

// stateDirEnv names the server's own writable directory in a confined
// server's environment.
const stateDirEnv = "TOOLWIRE_STATE_DIR"

// sandboxEnv are the variables a confined server gets besides those it
// inherits (see childEnv) and its proxy's.
var sandboxEnv = []string{stateDirEnv, "TMPDIR", "npm_config_cache", "UV_CACHE_DIR", "npm_config_offline", "UV_OFFLINE"}

// Default limits of a confined server.
const (
	defaultMaxProcesses = 512
	defaultMaxOpenFiles = 4096
)

// Confinement is how a stdio server is confined, as Status reports it.
type Confinement struct {
	sandbox.Confinement
	// Off is set when the configuration turned the sandbox off for the
	// server (or for all).
	Off bool `json:"off,omitempty"`
}

// String is "off (unconfined by configuration)" or the sandbox's own
// description.
func (c Confinement) String() string {
	if c.Off {
		return "off: unconfined by configuration"
	}
	return c.Confinement.String()
}

// Short is String for a table (see sandbox.Confinement.Short).
func (c Confinement) Short() string {
	if c.Off {
		return "OFF (sandbox: off)"
	}
	return c.Confinement.Short()
}

// sandboxText is how the server is confined, for the audit log; "" for a
// remote server.
func (set *settings) sandboxText() string {
	if set.confined == nil {
		return ""
	}
	return set.confined.String()
}

// sandboxOff reports whether the configuration turns the sandbox off for
// the server.
func (set *settings) sandboxOff() bool {
	return set.opts.Sandbox.Mode == config.SandboxOff || (set.cfg.Sandbox != nil && set.cfg.Sandbox.Off)
}

// kernel returns what the sandbox may use of the kernel.
func (set *settings) kernel() sandbox.Kernel {
	k := sandbox.Probe()
	if o := set.opts.Sandbox.Kernel; o != nil {
		k.LandlockABI = min(k.LandlockABI, o.LandlockABI)
		k.Seccomp = k.Seccomp && o.Seccomp
		k.UserNamespaces = k.UserNamespaces && o.UserNamespaces
		k.Root = k.Root || o.Root
	}
	return k
}

// confinement returns how the server is confined; nil for a remote one.
func (set *settings) confinement() *Confinement {
	if set.cfg.Transport != config.TransportStdio {
		return nil
	}
	if set.sandboxOff() {
		return &Confinement{Off: true}
	}
	return &Confinement{Confinement: sandbox.Plan(set.policyShape(), set.kernel())}
}

// policyShape is the server's policy without its paths, which is all
// Plan looks at.
func (set *settings) policyShape() sandbox.Policy {
	p := sandbox.Policy{Network: sandbox.NetworkNone, MaxProcesses: defaultMaxProcesses, MaxOpenFiles: defaultMaxOpenFiles}
	if sb := set.cfg.Sandbox; sb != nil {
		switch {
		case sb.NetworkOpen:
			p.Network = sandbox.NetworkOpen
		case len(sb.Network) > 0:
			p.Network = sandbox.NetworkProxy
		}
		if sb.MaxProcesses > 0 {
			p.MaxProcesses = uint64(sb.MaxProcesses)
		}
		if sb.MaxOpenFiles > 0 {
			p.MaxOpenFiles = uint64(sb.MaxOpenFiles)
		}
		if sb.MaxMemoryMB > 0 {
			p.MaxMemory = uint64(sb.MaxMemoryMB) << 20
		}
	}
	return p
}

// stateDir returns the server's own writable directory, made if needed.
func (set *settings) stateDir() (string, error) {
	root := set.opts.Sandbox.StateDir
	if root == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" || !filepath.IsAbs(base) {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("state directory: %w", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		root = filepath.Join(base, "toolwire", "servers")
	}
	dir := filepath.Join(root, set.cfg.Name)
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return dir, nil
}

// command returns the command that starts the stdio server cfg (expanded):
// through the sandbox's launcher unless the sandbox is off for it or can
// apply nothing; under security.sandbox: required, an error when the
// sandbox cannot be applied as configured.
//
// A server allowed some hosts gets an egress proxy of its own, which
// lives as long as ctx (the connection's).
func (d *dialer) command(ctx context.Context, c *conn, cfg config.Server) (*exec.Cmd, error) {
	set := d.set
	conf := set.confined
	if conf.Off {
		set.logger.Warn("the server runs unconfined: its sandbox is off", "server", cfg.Name)
		return d.plainCommand(cfg), nil
	}
	if err := conf.Err(); err != nil && set.opts.Sandbox.Mode == config.SandboxRequired {
		return nil, fmt.Errorf("security.sandbox is required, and the server cannot be confined: %w", err)
	}
	if !conf.Confined() {
		return d.plainCommand(cfg), nil
	}
	launcher := set.opts.Sandbox.Launcher
	if launcher == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("sandbox launcher: %w", err)
		}
		launcher = exe
	}
	path, err := exec.LookPath(cfg.Command)
	if err != nil {
		// Starting it fails with this error, as a connect error.
		return d.plainCommand(cfg), nil
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, err
	}
	state, err := set.stateDir()
	if err != nil {
		return nil, err
	}
	p := set.policyShape()
	p.Read = readPaths(path, cfg)
	p.Write = []string{state}
	if cfg.Sandbox != nil {
		p.Read = append(p.Read, cfg.Sandbox.Read...)
		p.Write = append(p.Write, cfg.Sandbox.Write...)
	}
	// npx and uvx keep what they fetch in the server's own directory: a
	// cache shared with the user's other programs would let one server
	// change the code another runs.
	env := map[string]string{"TMPDIR": filepath.Join(state, "tmp"), stateDirEnv: state,
		"npm_config_cache": filepath.Join(state, "npm"), "UV_CACHE_DIR": filepath.Join(state, "uv")}
	if p.Network == sandbox.NetworkNone {
		// Without a network, npm would retry the registry for a minute;
		// offline, it runs what it has cached or fails at once, saying so.
		env["npm_config_offline"], env["UV_OFFLINE"] = "true", "1"
	}
	for k, v := range cfg.Env {
		env[k] = v
	}
	var proxy *sandbox.Proxy
	if p.Network == sandbox.NetworkProxy {
		proxy, err = sandbox.NewProxy(sandbox.ProxyOptions{Allow: cfg.Sandbox.Network, Refused: func(host string, err error) {
			set.logger.Warn("egress refused", "server", cfg.Name, "host", host, "error", err)
		}})
		if err != nil {
			return nil, err
		}
		p.ProxyPort = proxy.Port()
		maps.Copy(env, proxy.Env()) // after cfg.Env: the server cannot opt out
	}
	cmd, release, err := sandbox.Command(launcher, p, set.kernel(), cfg.Name, path, cfg.Args, childEnv(env))
	if err != nil {
		if proxy != nil {
			proxy.Close()
		}
		return nil, err
	}
	if proxy != nil {
		context.AfterFunc(ctx, func() { _ = proxy.Close() })
	}
	// The server's pids cgroup, for root, goes with the connection: once
	// close has ended the server (gracefully: stdin, then signals), what
	// is left in the cgroup is killed and the cgroup removed. Not when the
	// connection's context ends: that comes first in a close, and would
	// kill the server before it could exit by itself.
	c.release = func() {
		if err := release(); err != nil {
			set.logger.Warn("the server's pids cgroup is left behind", "server", cfg.Name, "error", err)
		}
	}
	cmd.Dir = cfg.Cwd
	return cmd, nil
}

// plainCommand starts the server unconfined.
func (d *dialer) plainCommand(cfg config.Server) *exec.Cmd {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = childEnv(cfg.Env)
	cmd.Dir = cfg.Cwd
	return cmd
}

// readPaths are what a server may read besides the system's directories:
// its program's installation, the files and directories its arguments
// name, its working directory, its roots, and the Python installations
// uv manages. Never the home directory as a whole: a program or argument
// directly in it is readable alone.
func readPaths(program string, cfg config.Server) []string {
	home, _ := os.UserHomeDir()
	var out []string
	addFile := func(p string) {
		out = append(out, p)
		dir := installDir(p)
		if dir == "/" || (home != "" && within(home, dir)) {
			return // the home directory, or above it
		}
		out = append(out, dir)
	}
	addFile(program)
	if real, err := filepath.EvalSymlinks(program); err == nil && real != program {
		addFile(real)
	}
	for _, a := range cfg.Args {
		if !filepath.IsAbs(a) {
			continue
		}
		info, err := os.Stat(a)
		switch {
		case err != nil:
		case info.IsDir():
			out = append(out, a) // configured by the operator, as a root
		default:
			addFile(a)
		}
	}
	if cfg.Cwd != "" {
		out = append(out, cfg.Cwd)
	}
	out = append(out, cfg.Roots...)
	if home != "" {
		// uv's own Python installations; npx's and uvx's caches are the
		// server's own (see command).
		out = append(out, filepath.Join(home, ".local", "share", "uv"))
	}
	return out
}

// installDir is the directory a program or script is installed in: the
// one that holds the outermost node_modules above it (where its
// dependencies are), or else its own directory.
func installDir(p string) string {
	if i := strings.Index(p, string(filepath.Separator)+"node_modules"+string(filepath.Separator)); i > 0 {
		return p[:i]
	}
	return filepath.Dir(p)
}

// within reports whether dir is inner or one of its ancestors.
func within(inner, dir string) bool {
	rel, err := filepath.Rel(dir, inner)
	// Outside is ".." or "../…"; a name that only starts with two dots
	// ("..cache") is inside.
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
