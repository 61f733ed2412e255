// Package tool is toolwire's core: tools, their risk tiers, a registry and the
// executor that every call goes through.
//
// The package knows nothing about MCP. A tool written in Go and a tool adapted
// from an MCP server are the same [Tool] value, so schema validation,
// confirmation, audit and cancellation apply to both unchanged:
//
//	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: myConfirmer})
//	err := reg.Register(&tool.Tool{
//		Name:        "delete_file",
//		Description: "Delete one file.",
//		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
//		Tier:        tool.Destructive,
//		Handler:     deleteFile,
//	})
//	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: auditLog})
//	res := ex.Call(ctx, "delete_file", json.RawMessage(`{"path":"/tmp/x"}`))
//
// A call runs in two phases (see [Executor.Run]): first, in input order, each
// call is looked up and its arguments parsed and validated against the tool's
// compiled JSON Schema; then the valid calls run concurrently, each confirmed
// first when its tier is not [Read]. Whatever happens, every call ends with a
// [Result]: a tool failure, a refusal or a validation error is a result the
// model can read, never a panic or a hung call.
//
// Secrets a tool's source echoes back (a credential it was configured with,
// say) are masked by the executor when it is built with
// [ExecutorOptions].Mask: in every result it returns and in what the source
// relays to the [Caller] during the call. An executor without it returns
// the tools' own results, for a library caller that needs them raw; such a
// caller masks a result where it leaves the program with [Result.Masked].
package tool
