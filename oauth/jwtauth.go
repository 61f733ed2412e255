package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// ClientAssertionType is the client_assertion_type of private_key_jwt
// client authentication (RFC 7523, section 2.2).
const ClientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLifetime is how long a client assertion is valid: long enough
// for one token request, short enough that a captured one is soon useless.
const assertionLifetime = time.Minute

// ClientKey names where the private key of private_key_jwt client
// authentication is: a PEM file, or an environment variable holding the
// PEM text. Exactly one is set. The key is read each time an assertion is
// signed, never stored or kept.
type ClientKey struct {
	File string
	Env  string
}

// where names the key's source, for errors.
func (k *ClientKey) where() string {
	if k.File != "" {
		return "private key file " + k.File
	}
	return "environment variable " + k.Env + " (the private key)"
}

// check validates k without reading the key.
func (k *ClientKey) check() error {
	if (k.File == "") == (k.Env == "") {
		return errors.New("private key: want exactly one of a file and an environment variable")
	}
	return nil
}

// load reads and parses the key, and returns it with its JWS algorithm:
// ES256, ES384 or ES512 for an EC key on the matching curve, RS256 for
// RSA, EdDSA for Ed25519.
func (k *ClientKey) load() (crypto.Signer, jose.SignatureAlgorithm, error) {
	var raw []byte
	if k.File != "" {
		b, err := readPrivateFile(k.File)
		if err != nil {
			return nil, "", fmt.Errorf("read the private key: %w", err)
		}
		raw = b
	} else {
		v, ok := os.LookupEnv(k.Env)
		if !ok || v == "" {
			return nil, "", fmt.Errorf("%s is not set", k.where())
		}
		raw = []byte(v)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, "", fmt.Errorf("%s: not a PEM private key", k.where())
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, "", fmt.Errorf("%s: PEM block %q is not a private key (want PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY)", k.where(), block.Type)
	}
	if err != nil {
		// The parser's message never quotes the key.
		return nil, "", fmt.Errorf("%s: %w", k.where(), err)
	}
	switch key := key.(type) {
	case *ecdsa.PrivateKey:
		switch key.Curve {
		case elliptic.P256():
			return key, jose.ES256, nil
		case elliptic.P384():
			return key, jose.ES384, nil
		case elliptic.P521():
			return key, jose.ES512, nil
		}
		return nil, "", fmt.Errorf("%s: unsupported EC curve %s", k.where(), key.Curve.Params().Name)
	case *rsa.PrivateKey:
		if key.N.BitLen() < 2048 {
			return nil, "", fmt.Errorf("%s: RSA key of %d bits (want at least 2048)", k.where(), key.N.BitLen())
		}
		return key, jose.RS256, nil
	case ed25519.PrivateKey:
		return key, jose.EdDSA, nil
	}
	return nil, "", fmt.Errorf("%s: unsupported key type %T", k.where(), key)
}

// clientAssertion signs a private_key_jwt client assertion (RFC 7523,
// sections 2.2 and 3) for clientID: issuer and subject the client, audience
// the authorization server's issuer identifier (which RFC 7523bis
// recommends over the token endpoint URL, and which authorization servers
// accept), a fresh jti so that it cannot be replayed. algs, if not empty,
// are the algorithms the authorization server accepts
// (token_endpoint_auth_signing_alg_values_supported): a key of another
// algorithm is an error rather than a refused request.
func clientAssertion(k *ClientKey, clientID, audience string, algs []string, now time.Time) (string, error) {
	key, alg, err := k.load()
	if err != nil {
		return "", err
	}
	if len(algs) > 0 && !slices.Contains(algs, string(alg)) {
		return "", fmt.Errorf("%s is an %s key; the authorization server accepts %v", k.where(), alg, algs)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.where(), err)
	}
	claims := jwt.Claims{
		Issuer:    clientID,
		Subject:   clientID,
		Audience:  jwt.Audience{audience},
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now.Add(-5 * time.Second)),
		Expiry:    jwt.NewNumericDate(now.Add(assertionLifetime)),
		ID:        rand.Text(),
	}
	s, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign the client assertion: %w", err)
	}
	return s, nil
}

// assertionParams returns the token request parameters of private_key_jwt
// client authentication.
func assertionParams(assertion string) url.Values {
	return url.Values{"client_assertion_type": {ClientAssertionType}, "client_assertion": {assertion}}
}

// withClientAssertion returns a copy of client whose POSTs to
// tokenEndpoint authenticate clientID with private_key_jwt: a fresh
// assertion signed with key (audience the issuer) in the body, with
// client_id, instead of any secret or Basic header. It is how the code
// exchange (made by go-sdk or golang.org/x/oauth2) and each refresh carry
// the assertion, which neither offers.
func withClientAssertion(client *http.Client, tokenEndpoint string, key *ClientKey, clientID, issuer string, algs []string) *http.Client {
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c := *client
	c.Transport = &assertionTransport{base: base, tokenEndpoint: tokenEndpoint, key: key, clientID: clientID, issuer: issuer, algs: algs}
	return &c
}

type assertionTransport struct {
	base                            http.RoundTripper
	tokenEndpoint, clientID, issuer string
	key                             *ClientKey
	algs                            []string
}

func (t *assertionTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return rewriteTokenForm(t.base, t.tokenEndpoint, req, func(out *http.Request, form url.Values) error {
		a, err := clientAssertion(t.key, t.clientID, t.issuer, t.algs, time.Now())
		if err != nil {
			return err
		}
		form.Del("client_secret")
		form.Set("client_id", t.clientID)
		for k, v := range assertionParams(a) {
			form[k] = v
		}
		out.Header.Del("Authorization")
		return nil
	})
}

// readPrivateFile reads a small file that holds a credential, refusing one
// that group or others may read, as the store's key file: a key anyone on
// the machine can read authenticates anyone.
func readPrivateFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := st.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %04o: group and others must have no access (chmod 600 it)", path, perm)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, 64<<10))
}
