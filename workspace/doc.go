// Package workspace assembles toolwire from a configuration, as the
// toolwire command does: the store its state is kept in (the files of one
// machine, or the PostgreSQL database a fleet shares: the configuration's
// store, or Options.StoreURL), the audit log on it (its signing key and
// whether it is required), the secrets every result, log line and audit event is
// masked with, the registry and its confirmer, the executor, the security
// profile (strict egress, tool pins, description and tool limits), the
// OAuth handlers of remote servers, and the manager that starts every
// configured server. A Go program gets exactly what the CLI gets:
//
//	file, err := config.LoadAll([]string{"toolwire.yaml"})
//	if err != nil {
//		return err // every problem of every file, one per line
//	}
//	w, err := workspace.Open(ctx, file, &workspace.Options{Confirmer: myConfirmer})
//	if err != nil {
//		return err // a required server failed, no server started, or the configuration cannot be applied
//	}
//	defer w.Close() // servers (and their child processes), the audit log, the store
//
//	res := w.Executor().Call(ctx, "files__read_text_file", json.RawMessage(`{"path":"a.txt"}`))
//
// To serve it all over MCP instead, as toolwire serve does, open it with
// the approvals of the configuration's gateway section as the confirmer,
// and serve its gateway with the callers' authentication the section
// configures:
//
//	policy, err := workspace.ApprovalPolicy(file.Gateway)
//	...
//	httpOpts, err := workspace.Authentication(ctx, file.Gateway) // tokens, JWTs, roles
//	...
//	w, err := workspace.Open(ctx, file, &workspace.Options{Confirmer: gateway.NewApprover(policy)})
//	...
//	http.Serve(ln, w.Handler(w.Gateway(nil), httpOpts))
//
// A server that fails to start is reported (through [Options.Logger], or
// [Options.OnFailed]) and left out, and the others are used; Open fails
// when a required server fails or when none starts (errors matching
// [ErrNotStarted]). What the CLI's flags decide is in [Options]; what is
// for a person at a terminal (prompts, the start-up lines, exit statuses)
// stays in the CLI.
package workspace
