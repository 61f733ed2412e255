// Package mcpclient adapts MCP servers' tools into a [tool.Registry] and
// keeps them there.
//
// [Connect] starts or reaches one server (stdio, Streamable HTTP or legacy
// SSE, through the official go-sdk), lists every tool, adapts each one,
// registers them all at once, and then supervises the server: a lost
// session is re-established with backoff, a changed tool list is applied,
// and calls always go through the live session. [Manager] does the same for
// many servers started in parallel:
//
//	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: confirmer})
//	srv, err := mcpclient.Connect(ctx, config.Server{
//		Name: "files", Transport: "stdio", Command: "mcp-files",
//		TierOverrides: map[string]string{"write_file": "write"},
//	}, reg, nil)
//	if err != nil { ... }
//	defer srv.Close()
//	// reg now holds files__read_file, files__write_file, ...
//
// Adaptation names each tool <prefix>__<tool> (the prefix defaults to the
// server name), calls it under its original name, takes its tier from the
// operator's configuration (a server's destructiveHint may raise it, nothing
// the server says lowers it) and keeps its input schema for validation. A
// tool whose schema does not compile is left out with a warning; a server
// with write or destructive tools and a registry without a confirmer is
// refused before anything is registered.
//
// Every request to the server is bounded by the server's timeout (60 s by
// default) and by the caller's context; cancelling the caller's context
// sends notifications/cancelled to the server. Each server moves through
// the lifecycle of [State]; see docs/architecture.md.
//
// What a server offers besides tools (resources, resource templates,
// prompts, completions) is its [Catalog], which the gateway serves beside
// the registry's tools.
package mcpclient
