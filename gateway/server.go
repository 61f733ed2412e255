package gateway

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// ServerOptions configures [NewHTTPServer]: the connection limits of the
// listener in front of a [Handler]. A zero field sets no limit, except as
// said.
type ServerOptions struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadBodyTimeout bounds reading a request's body, from the end of its
	// headers; a client that trickles it is cut off. It does not bound the
	// response: a call may take as long as its tool does, and an event
	// stream stays open.
	ReadBodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request for this
	// long.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers; 0 means net/http's 1 MiB.
	MaxHeaderBytes int
	// TLS, when set, is used for every connection (see [CertReloader]).
	TLS *tls.Config
}

// DefaultServerOptions are what "toolwire serve --http" uses by default.
var DefaultServerOptions = ServerOptions{
	ReadHeaderTimeout: 10 * time.Second,
	ReadBodyTimeout:   30 * time.Second,
	IdleTimeout:       2 * time.Minute,
	MaxHeaderBytes:    64 << 10,
}

// NewHTTPServer returns an HTTP server for h with opts' limits. Serve it
// with ServeTLS when opts.TLS is set (its certificate comes from the
// config, so the file arguments are empty).
func NewHTTPServer(h http.Handler, options *ServerOptions) *http.Server {
	opts := DefaultServerOptions
	if options != nil {
		opts = *options
	}
	if opts.ReadBodyTimeout > 0 {
		h = bodyDeadline(opts.ReadBodyTimeout, h)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		TLSConfig:         opts.TLS,
	}
}

// bodyDeadline sets a read deadline of d on the connection while a
// request's body is read and clears it once the body is done. Not
// http.Server.ReadTimeout: that deadline stays on the connection after the
// body, and a read that hits it during a long response cancels the
// request, which would cut long calls and event streams.
func bodyDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			next.ServeHTTP(w, r) // not a connection that has deadlines
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, clear: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		next.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	io.ReadCloser
	once  sync.Once
	clear func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.clear)
	}
	return n, err
}

// CertReloader serves the certificate of a PEM certificate file and key
// file, reading them again when either changes (its size or modification
// time), so a renewed certificate is served without a restart. A pair
// that fails to load keeps the one before in service, and the failure is
// reported to onError.
type CertReloader struct {
	certFile, keyFile string
	onError           func(error)

	mu       sync.Mutex
	cert     *tls.Certificate
	certStat fileStamp
	keyStat  fileStamp
}

type fileStamp struct {
	size int64
	mod  time.Time
}

// NewCertReloader loads the pair now: a pair that does not load is an
// error naming the files.
func NewCertReloader(certFile, keyFile string, onError func(error)) (*CertReloader, error) {
	if onError == nil {
		onError = func(error) {}
	}
	r := &CertReloader{certFile: certFile, keyFile: keyFile, onError: onError}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// TLSConfig returns a server configuration that takes its certificate
// from r, TLS 1.2 at least.
func (r *CertReloader) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.current(), nil },
		NextProtos:     []string{"h2", "http/1.1"},
	}
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime()}, nil
}

// current returns the certificate, reloading it first if a file changed.
// A handshake costs two stats.
func (r *CertReloader) current() *tls.Certificate {
	cs, err1 := stamp(r.certFile)
	ks, err2 := stamp(r.keyFile)
	r.mu.Lock()
	changed := err1 == nil && err2 == nil && (cs != r.certStat || ks != r.keyStat)
	r.mu.Unlock()
	if changed {
		if err := r.reload(); err != nil {
			// Keep serving the pair before; try again at the next change
			// (a renewal may write the two files one after the other).
			r.mu.Lock()
			r.certStat, r.keyStat = cs, ks
			r.mu.Unlock()
			r.onError(err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert
}

func (r *CertReloader) reload() error {
	cs, err := stamp(r.certFile)
	if err != nil {
		return fmt.Errorf("tls certificate %s: %w", r.certFile, err)
	}
	ks, err := stamp(r.keyFile)
	if err != nil {
		return fmt.Errorf("tls key %s: %w", r.keyFile, err)
	}
	certPEM, err := os.ReadFile(r.certFile)
	if err != nil {
		return fmt.Errorf("tls certificate %s: %w", r.certFile, err)
	}
	keyPEM, err := os.ReadFile(r.keyFile)
	if err != nil {
		return fmt.Errorf("tls key %s: %w", r.keyFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	clear(keyPEM)
	if err != nil {
		return fmt.Errorf("tls certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	if bytes.Contains(certPEM, []byte("PRIVATE KEY")) {
		return fmt.Errorf("tls certificate %s holds a private key: keep the key only in the key file", r.certFile)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cert, r.certStat, r.keyStat = &cert, cs, ks
	return nil
}
