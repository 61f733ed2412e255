package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/gateway"
	"golang.org/x/term"
)

// maxTokenInput bounds what "token hash" reads from stdin.
const maxTokenInput = 64 << 10

func newTokenCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make bearer tokens for toolwire serve, and hash them for the configuration",
		Long: `toolwire serve --http authenticates callers with the bearer tokens listed in
the configuration's gateway.tokens. The configuration keeps only each token's
SHA-256, never the token: "token new" makes a token and prints it for its
caller together with the hash to configure; "token hash" hashes a token you
already have.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "new",
		Short: "Print a new random token on stdout and its SHA-256 on stderr",
		Long: `Print a new random token (32 bytes from the system's secure random source,
base64url without padding) on stdout, and "sha256: HASH" on stderr: hand the
token to its caller and put only the hash in gateway.tokens, e.g.

  toolwire token new > alice.token`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var raw [32]byte
			if _, err := rand.Read(raw[:]); err != nil {
				return &exitError{exitToolErr, fmt.Errorf("reading random bytes: %w", err)}
			}
			token := base64.RawURLEncoding.EncodeToString(raw[:])
			fmt.Fprintln(e.stdout, token)
			fmt.Fprintf(e.stderr, "sha256: %s\n", gateway.HashToken(token))
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "hash",
		Short: "Read a token from stdin (one line) and print its SHA-256 for gateway.tokens",
		Long: `Read one token from stdin, one line, and print its SHA-256 as 64 hex digits:
the value of a gateway.tokens entry's sha256. On a terminal the token is
read without echo.

  toolwire token hash < alice.token`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			token, err := readToken(e)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			fmt.Fprintln(e.stdout, gateway.HashToken(token))
			return nil
		},
	})
	return cmd
}

// readToken reads one token from stdin: from a terminal, one line typed
// without echo; otherwise all of stdin, which must be one line.
func readToken(e *env) (string, error) {
	var text string
	if f, ok := e.stdin.(*os.File); ok && e.isTerminal() {
		fmt.Fprint(e.stderr, "Token (not echoed): ")
		raw, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(e.stderr)
		if err != nil {
			return "", fmt.Errorf("reading the token: %w", err)
		}
		text = string(raw)
	} else {
		raw, err := io.ReadAll(io.LimitReader(e.stdin, maxTokenInput+1))
		if err != nil {
			return "", fmt.Errorf("reading the token from stdin: %w", err)
		}
		if len(raw) > maxTokenInput {
			return "", fmt.Errorf("stdin holds more than %d bytes; want one token on one line", maxTokenInput)
		}
		line, rest, _ := strings.Cut(string(raw), "\n")
		if strings.TrimSpace(rest) != "" {
			return "", errors.New("stdin holds more than one line; want one token on one line")
		}
		text = strings.TrimSuffix(line, "\r")
	}
	switch {
	case text == "":
		return "", errors.New("no token on stdin: want one token on one line")
	case strings.IndexFunc(text, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		// It travels as "Authorization: Bearer TOKEN", which such a
		// token cannot survive, so its hash would never match.
		return "", errors.New("the token contains spaces or control characters, which a bearer token cannot carry")
	}
	return text, nil
}
