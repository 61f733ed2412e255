// Package agent runs the LLM tool loop over a [tool.Executor]: it sends a
// conversation and the registry's tools to a model, runs the calls the model
// asks for (validated, confirmed, audited and cancelled by the executor like
// any other call), and feeds the results back until the model answers.
//
//	model, err := agent.NewOpenAI("gpt-4o", &agent.OpenAIOptions{
//		BaseURL:   "http://127.0.0.1:11434/v1", // Ollama; empty for OpenAI
//		APIKey:    os.Getenv("OPENAI_API_KEY"),
//		APIKeyEnv: "OPENAI_API_KEY",
//	})
//	...
//	a := agent.New(executor, model, &agent.Options{
//		OnText: func(s string) { fmt.Print(s) },
//	})
//	out, err := a.Run(ctx, "Save a note titled groceries, then list my notes.")
//
// The rules of the loop:
//
//   - The calls of one model reply run as one concurrent batch
//     ([tool.Executor.Run]); their results go back in the model's order.
//   - A call the executor refuses (an unknown tool, arguments that are not
//     JSON or fail the schema, a declined confirmation) is a result the model
//     reads, so it can correct itself; a declined call's result tells it not
//     to retry.
//   - The model is shown a compacted form of each result, within
//     [Options].ResultBudget bytes of text and ImageBudget bytes of images;
//     [Outcome].Steps keep every result whole.
//   - After [Options].MaxToolRounds rounds, a reply that still calls tools
//     ends the run with [ErrRoundLimit].
//   - When the tool definitions would cost more than [Options].ToolBudget
//     tokens (see [EstimateTokens]), the model gets the [FindTools] meta-tool
//     instead and sees only the tools it has searched for or called.
//   - Rate limits are retried within [Options].MaxRetries and MaxRetryWait,
//     honouring the endpoint's Retry-After; every failed request to the model
//     is recorded in the audit log as an llm.failed event.
//   - A reply cut at the model's token limit is never an answer: Send
//     returns [ErrCut] (with the partial text), and a call the limit cut is
//     not run; its result tells the model why ([ToolCutReason]).
//   - A reply stream that ends before its terminator, or sends nothing for
//     the provider's IdleTimeout, fails with [ErrStalled].
//   - Cancelling the context cancels the request to the model and every tool
//     call in flight.
//   - The model is sent what the executor returns: build it with
//     [tool.ExecutorOptions].Mask so that secrets a server echoes back are
//     masked before they reach the model's provider.
//
// Providers: [OpenAI] speaks the Chat Completions API of OpenAI and of the
// servers compatible with it (Ollama, vLLM, LM Studio, llama.cpp);
// [Anthropic] speaks the Messages API. Both stream. Any other model can be
// plugged in through the [Provider] interface.
package agent
