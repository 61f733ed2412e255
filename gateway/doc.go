// Package gateway serves a tool registry over MCP.
//
// Every call that arrives goes through the same [tool.Executor] as any other
// caller's, so schema validation, tiers, confirmation and audit apply
// unchanged. What a client is told about a tool is derived from what is
// enforced, by one function ([Annotations]): a read tool claims
// readOnlyHint, a destructive one destructiveHint, and nothing else claims
// either.
//
// Every MCP revision is served, 2024-11-05 to 2026-07-28: the 2025
// revisions' clients open sessions, 2026-07-28 clients have none
// ([Gateway.Handler] serves both on one endpoint). docs/protocol.md says
// how each feature maps per revision.
//
// Write and destructive calls are approved per an [ApprovalPolicy]: by
// asking the connected client's user through elicitation, showing the
// validated arguments (when the client supports elicitation), by
// refusing, or by allowing. A 2025 client is asked with
// elicitation/create during the call; a 2026-07-28 client, which may not
// be sent requests during a call, with a multi round-trip request while
// the call waits, parked ([Parking]). A refusal is an isError result the
// model can read, never a protocol error. Nothing the client sends (an
// "approved" argument, annotations) changes the decision.
//
// Several gateways can serve one fleet behind a load balancer that keeps
// no client on one replica: with a [SessionStore] any replica serves any
// 2025 session's request, with a [CallLimiter] a caller's rate holds for
// the fleet, and with a [Relay] a request about a call or an approval page
// another replica holds reaches it (package store implements them on
// PostgreSQL; package workspace wires them; docs/fleet.md).
//
// Clients receive what the executor returns: build it with
// [tool.ExecutorOptions].Mask so that secrets an upstream echoes back, in
// a result, an error, progress or a log line, are masked before they are
// served.
//
//	approver := gateway.NewApprover(gateway.ApprovalPolicy{})
//	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: approver})
//	ex := tool.NewExecutor(reg, nil)
//	gw := gateway.New(ex, &gateway.Options{})
//	srv, stop := gw.Server(nil) // every tool; or a visibility filter per caller
//	defer stop()
//	err := srv.Run(ctx, &mcp.StdioTransport{})
package gateway
