package mcpclient

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
)

// configuredSecrets returns the values of a server's configuration that
// are masked in everything toolwire prints or passes on, and a warning for
// each credential too short to mask (naming the server and the field,
// never the value).
//
// The secrets are: every value that came from a ${VAR}, an ${input:ID} or
// the env file (fromVars, as config.ExpandServer returns them), the bearer
// token, and the env and header values whose names say they are
// credentials (credentialName), even when written literally. Other literal
// values (a directory, a log level) are not secrets: masking them would
// mangle every result that mentions them.
func configuredSecrets(raw, expanded config.Server, fromVars []string) (values, warnings []string) {
	values = slices.Clone(fromVars)
	check := func(path, v string, rawValue string) {
		if v == "" {
			return
		}
		values = append(values, v)
		if audit.Maskable(v) {
			return
		}
		from := ""
		if refs := placeholders(rawValue); len(refs) > 0 {
			from = " (set by " + strings.Join(refs, ", ") + ")"
		}
		warnings = append(warnings, fmt.Sprintf("server %q: %s%s: the value is shorter than %d characters, too short to mask; it is shown in clear wherever the server echoes it",
			expanded.Name, path, from, audit.MinSecretLen))
	}
	check("bearerToken", expanded.BearerToken, raw.BearerToken)
	for _, k := range slices.Sorted(maps.Keys(expanded.Headers)) {
		if credentialName(k) {
			check("headers."+k, expanded.Headers[k], raw.Headers[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(expanded.Env)) {
		if !credentialName(k) {
			continue
		}
		if rawValue, ok := raw.Env[k]; ok {
			check("env."+k, expanded.Env[k], rawValue)
		} else {
			check("envFile "+k, expanded.Env[k], "")
		}
	}
	return values, warnings
}

// placeholders lists the ${...} placeholders written in s.
func placeholders(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			return out
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return out
		}
		out = append(out, s[i:i+j+1])
		s = s[i+j+1:]
	}
}

// credentialWords are the parts of a variable or header name that mark its
// value as a credential: API_KEY, GITHUB_TOKEN, X-Api-Key, Authorization,
// DB_PASSWORD, CLIENT_SECRET.
var credentialWords = []string{"key", "token", "secret", "passw", "passphrase", "auth", "credential", "cookie", "session", "private", "signature", "bearer"}

// credentialName reports whether an env variable or header named name
// holds a credential by the words in its name. Short words (PAT, PW, PWD,
// PIN) count only as a whole part of the name, so PATH and PINNED do not.
func credentialName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	for _, part := range strings.FieldsFunc(n, func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9') }) {
		switch part {
		case "pat", "pw", "pwd", "pin", "pass":
			return true
		}
	}
	return false
}
