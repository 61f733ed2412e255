// Package config reads toolwire's server configuration and turns it into
// validated, normalized server descriptions.
//
// Two shapes are understood, told apart by their top-level keys: toolwire's
// own file (YAML or JSON with a "servers" map and an optional "audit" map) and
// the "mcpServers" JSON used by Claude Desktop, Claude Code and Cursor. Every
// error names the file, the line, the field path and what was expected.
//
// Loading never expands ${VAR} placeholders, so a loaded configuration can be
// written back to disk without leaking secrets. Expansion happens later, at
// the transport boundary:
//
//	f, err := config.Load("toolwire.yaml")
//	if err != nil {
//		return err // every problem in the file, one per line
//	}
//	for _, w := range f.Warnings {
//		log.Print(w)
//	}
//	for _, s := range f.Servers {
//		live, secrets, err := config.ExpandServer(s, os.LookupEnv)
//		if err != nil {
//			return err
//		}
//		redactor.Add(secrets...)
//		connect(live)
//	}
package config
