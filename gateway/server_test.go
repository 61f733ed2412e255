package gateway

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveRaw serves h with opts on 127.0.0.1 and returns the address.
func serveRaw(t *testing.T, h http.Handler, opts ServerOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer(h, &opts)
	go func() {
		if opts.TLS != nil {
			_ = hs.ServeTLS(ln, "", "")
		} else {
			_ = hs.Serve(ln)
		}
	}()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// closedWithin reports whether the server ends conn (EOF, a reset, or a
// response followed by EOF) within d.
func closedWithin(t *testing.T, conn net.Conn, d time.Duration) bool {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func TestSlowBodyIsCutAtItsDeadline(t *testing.T) {
	t.Parallel()
	read := make(chan error, 1)
	addr := serveRaw(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		read <- err
	}), ServerOptions{ReadBodyTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers promise 100 bytes; 10 come, then nothing.
	if _, err := io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("reading the trickled body: %v, want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the trickled body was not cut off")
	}
	if !closedWithin(t, conn, 10*time.Second) {
		t.Error("the connection of the trickled body stayed open")
	}
}

func TestBodyDeadlineDoesNotCutALongResponse(t *testing.T) {
	t.Parallel()
	addr := serveRaw(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		select { // a call that outlasts the body deadline
		case <-time.After(400 * time.Millisecond):
			_, _ = io.WriteString(w, "done")
		case <-r.Context().Done():
		}
	}), ServerOptions{ReadBodyTimeout: 100 * time.Millisecond})
	res, err := http.Post("http://"+addr+"/mcp", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if b, _ := io.ReadAll(res.Body); string(b) != "done" {
		t.Errorf("a response longer than the body deadline: %q, want done", b)
	}
}

func TestIdleKeepAliveConnectionIsClosed(t *testing.T) {
	t.Parallel()
	addr := serveRaw(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ServerOptions{IdleTimeout: 200 * time.Millisecond, ReadHeaderTimeout: time.Minute})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the idle keep-alive connection: %v, want EOF (closed by the server)", err)
	}
}

func TestOversizedHeadersAreRefused(t *testing.T) {
	t.Parallel()
	addr := serveRaw(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), ServerOptions{MaxHeaderBytes: 1024})
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 8<<10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("8 KiB of headers past a 1 KiB limit: %d, want 431", res.StatusCode)
	}
}

// writeCert writes a fresh self-signed certificate for 127.0.0.1 and its
// key, and returns the certificate.
func writeCert(t *testing.T, certFile, keyFile string, serial int64, mod time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "toolwire test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestTLSServesTheCertificateAndReloadsItWhenItChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := writeCert(t, certFile, keyFile, 1, time.Now().Add(-time.Minute))
	r, err := NewCertReloader(certFile, keyFile, func(err error) { t.Errorf("reload: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, ApprovalPolicy{})
	h := f.gw.Handler(&HTTPOptions{})
	t.Cleanup(h.Close)
	addr := serveRaw(t, h, ServerOptions{TLS: r.TLSConfig()})

	get := func(trust *x509.Certificate) (*big.Int, error) {
		pool := x509.NewCertPool()
		pool.AddCert(trust)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
		res, err := c.Get("https://" + addr + LivenessPath)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("liveness over TLS: %d", res.StatusCode)
		}
		return res.TLS.PeerCertificates[0].SerialNumber, nil
	}
	if serial, err := get(first); err != nil || serial.Int64() != 1 {
		t.Fatalf("over TLS: serial %v, %v; want the first certificate", serial, err)
	}
	if res, err := http.Get("http://" + addr + LivenessPath); err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Error("plain HTTP to the TLS listener was served")
		}
	}
	second := writeCert(t, certFile, keyFile, 2, time.Now())
	if serial, err := get(second); err != nil || serial.Int64() != 2 {
		t.Fatalf("after the files changed: serial %v, %v; want the second certificate", serial, err)
	}
}

func TestCertReloaderRefusesABadPair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile, 1, time.Now())
	other := filepath.Join(dir, "other-key.pem")
	writeCert(t, filepath.Join(dir, "other.pem"), other, 2, time.Now())
	if _, err := NewCertReloader(certFile, other, nil); err == nil || !strings.Contains(err.Error(), certFile) {
		t.Errorf("a certificate with another's key: %v, want an error naming the files", err)
	}
	if _, err := NewCertReloader(filepath.Join(dir, "missing.pem"), keyFile, nil); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("a missing certificate: %v, want an error naming it", err)
	}
}
