package tool

import "context"

// UpstreamTask ties a call to the task its upstream server runs it as (MCP
// tasks), for a caller that keeps calls beyond its own life: the gateway's
// tasks, which another replica takes over when the one running the call
// is lost.
type UpstreamTask struct {
	// Resume, when set, is the id of a task the upstream already runs for
	// this call: the source follows it to its result instead of calling
	// the tool again.
	Resume string
	// Started, when set, is told the upstream's id of the task a call
	// became (a source that drives tasks calls it once the server names
	// the task), and the server's name.
	Started func(server, id string)
}

type upstreamTaskKey struct{}

// WithUpstreamTask returns ctx carrying ut for the calls made with it.
func WithUpstreamTask(ctx context.Context, ut *UpstreamTask) context.Context {
	return context.WithValue(ctx, upstreamTaskKey{}, ut)
}

// UpstreamTaskFrom returns the UpstreamTask ctx carries, or nil.
func UpstreamTaskFrom(ctx context.Context) *UpstreamTask {
	ut, _ := ctx.Value(upstreamTaskKey{}).(*UpstreamTask)
	return ut
}
