// Package config reads toolwire's server configuration and turns it into
// validated, normalized server descriptions.
//
// Several dialects are understood, told apart by their structure (see
// docs/config.md): toolwire's own file (YAML or JSON with a "servers" map
// and optional "inputs" and "audit" maps); the "mcpServers" JSON of Claude
// Desktop, Claude Code and Cursor; VS Code's .vscode/mcp.json ("servers"
// with "type", and an "inputs" list); and a list of servers, a single
// server, or a map from name to server. Every error names the file, the
// line, the field path and what was expected; syntax errors also give the
// column. Marshal writes any loaded File as toolwire's own YAML.
//
// Loading never expands ${VAR} or ${input:ID} placeholders, so a loaded
// configuration can be written back to disk without leaking secrets.
// Expansion happens later, at the transport boundary:
//
//	f, err := config.Load("toolwire.yaml")
//	if err != nil {
//		return err // every problem in the file, one per line
//	}
//	for _, w := range f.Warnings {
//		log.Print(w)
//	}
//	for _, s := range f.Servers {
//		if s.Disabled {
//			continue
//		}
//		live, secrets, err := config.ExpandServer(s, config.Resolver{LookupEnv: os.LookupEnv, Input: askOnTerminal})
//		if err != nil {
//			return err
//		}
//		redactor.Add(secrets...)
//		connect(live)
//	}
package config
