package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/store"
	"github.com/toolwire/toolwire/workspace"
)

// storeEnv names the variable that gives the store URL when --store does
// not: where a URL with a password belongs, since a flag's value is in
// the process list for every user of the machine to read.
const storeEnv = "TOOLWIRE_STORE"

// storeURL is the store the command line names: --store, else
// $TOOLWIRE_STORE; "" leaves it to the configuration's store.
func storeURL(e *env, g *globalFlags) string {
	if g.store != "" {
		return g.store
	}
	v, _ := e.lookupEnv(storeEnv)
	return v
}

// checkStoreFlag refuses a --store URL that holds a password, as the
// configuration file refuses one: it would be in the process list.
func checkStoreFlag(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil // store.Open says what is wrong, without the URL
	}
	_, has := u.User.Password()
	for k := range u.Query() {
		has = has || strings.Contains(strings.ToLower(k), "password")
	}
	if has {
		return fmt.Errorf("--store: the URL holds a password, which every user of the machine can read in the process list: give it in PGPASSWORD or ~/.pgpass, or put the whole URL in %s", storeEnv)
	}
	return nil
}

// storeFlagHint adds, to the workspace's errors about the store, which
// flags set what they name.
func storeFlagHint(err error) error {
	if errors.Is(err, workspace.ErrAuditFileOnPostgres) {
		return fmt.Errorf("%w (audit.file, or --audit)", err)
	}
	return err
}

// openStore opens the store a command works on, as workspace.Open would
// (--store, $TOOLWIRE_STORE or the configuration's store): for the
// commands that need the state but no server (pins list and forget, auth
// status, logout, audit verify). file nil means the configuration the
// flags name. With withAudit false the audit file is not opened (a
// command that records nothing does not create one); on PostgreSQL the
// audit table is there either way. Its errors are the configuration's
// (exit status 2).
func openStore(ctx context.Context, e *env, g *globalFlags, file *config.File, withAudit bool) (*store.Store, *config.File, error) {
	if file == nil {
		var err error
		if file, err = loadConfig(e, g); err != nil {
			return nil, nil, err
		}
	}
	opts := &workspace.Options{StoreURL: storeURL(e, g), LookupEnv: e.lookupEnv, Logger: newLogger(e.stderr, g, nil)}
	f := file
	if withAudit {
		opts.AuditFile = g.audit
	} else {
		c := *file
		c.Audit.File, c.Audit.SigningKey = "", ""
		f = &c
	}
	st, err := workspace.OpenStore(ctx, f, opts)
	if err != nil {
		return nil, nil, &exitError{exitUsage, storeFlagHint(err)}
	}
	return st, file, nil
}

// optionalConfig loads the configuration for a command that needs only
// its store setting (auth status, logout, audit verify), which worked
// without any configuration before there was one and still does: a file
// the flags or $TOOLWIRE_CONFIG name, or ./toolwire.yaml, must load; with
// none, the configuration is empty (the store is --store,
// $TOOLWIRE_STORE, or the files of one machine).
func optionalConfig(e *env, g *globalFlags) (*config.File, error) {
	if _, err := configPaths(e, g.config); err != nil {
		return &config.File{}, nil
	}
	return loadConfig(e, g)
}

// pinsPlace names where the pins are, for messages: the pins file, or the
// PostgreSQL store.
func pinsPlace(st *store.Store) string {
	if st.Kind() == store.Postgres {
		return "PostgreSQL " + st.String()
	}
	return st.Pins().Path()
}

// pinsWhere says where the pins are, after "the pins": "file PATH", or
// "in PostgreSQL URL".
func pinsWhere(st *store.Store) string {
	if st.Kind() == store.Postgres {
		return "in " + pinsPlace(st)
	}
	return "file " + pinsPlace(st)
}

// tokensPlace names where the OAuth tokens are, for messages.
func tokensPlace(st *store.Store) string {
	if st.Kind() == store.Postgres {
		return "PostgreSQL " + st.String()
	}
	return st.Tokens().Path()
}
