// Package gateway serves a tool registry over MCP.
//
// Every call that arrives goes through the same [tool.Executor] as any other
// caller's, so schema validation, tiers, confirmation and audit apply
// unchanged. What a client is told about a tool is derived from what is
// enforced, by one function ([Annotations]): a read tool claims
// readOnlyHint, a destructive one destructiveHint, and nothing else claims
// either.
//
// Write and destructive calls are approved per an [ApprovalPolicy]: by
// asking the connected client's user through elicitation/create, showing
// the validated arguments (when the client supports elicitation), by
// refusing, or by allowing. A refusal is an isError result the model can
// read, never a protocol error. Nothing the client sends (an "approved"
// argument, annotations) changes the decision.
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
