package config

import (
	"net/url"
	"strings"
)

// store reads the top-level "store": a PostgreSQL URL, or a ${VAR}
// placeholder for one (expanded where the store is opened, as every
// placeholder is). A password written into the URL is refused: the
// configuration file is not where secrets live (see docs/fleet.md).
func (d *decoder) store(v *node) string {
	const path = "store"
	s, ok := d.nonEmpty(v, path)
	if !ok {
		return ""
	}
	if strings.Contains(s, "${") {
		return s
	}
	const want = "want a PostgreSQL URL, postgres://USER@HOST:PORT/DATABASE, or a ${VAR} placeholder for one; leave it out for the files of one machine"
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Opaque != "" {
		d.errorf(v.line, path, "%s", want)
		return ""
	}
	_, hasPassword := u.User.Password()
	for k := range u.Query() {
		hasPassword = hasPassword || strings.Contains(strings.ToLower(k), "password")
	}
	if hasPassword {
		d.errorf(v.line, path, "the URL holds a password: give it in PGPASSWORD or a ~/.pgpass file, or write the whole URL in an environment variable and store: ${VAR}")
		return ""
	}
	return s
}
