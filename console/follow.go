package console

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"
)

// follow announces the changes of the sources on the event stream until
// ctx ends: the registry's and the queue's as they tell them, the rest
// (servers' states, the policy, lasting approvals changed by another
// process) by looking every Poll.
func (c *Console) follow(ctx context.Context) {
	src := c.sources()
	stopTools := src.Workspace.Registry().Watch(func() { c.hub.notify(topicTools) })
	defer stopTools()
	if q := src.Workspace.Pending(); q != nil {
		changed := q.Watch(ctx)
		go func() {
			for range changed { // closed when ctx ends
				c.hub.notify(topicApprovals)
			}
		}()
	}
	var servers, policy, grants uint64
	tick := time.NewTicker(c.opts.Poll)
	defer tick.Stop()
	for {
		if s := c.serversPrint(); s != servers {
			if servers != 0 {
				c.hub.notify(topicServers)
			}
			servers = s
		}
		if p := c.policyPrint(); p != policy {
			if policy != 0 {
				c.hub.notify(topicTools)
			}
			policy = p
		}
		if g := c.grantsPrint(ctx); g != grants {
			if grants != 0 {
				c.hub.notify(topicApprovals)
			}
			grants = g
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// The prints are hashes of what a page shows of a source, never zero.

func (c *Console) serversPrint() uint64 {
	h := fnv.New64a()
	for _, s := range c.sources().Workspace.Manager().Status() {
		fmt.Fprintf(h, "%s|%s|%s|%d|%s|%d|%d|%d\n", s.Name, s.State, s.Protocol, s.Tools, s.LastError, s.Attempt, s.PID, s.CallerSessions)
	}
	return h.Sum64() | 1
}

func (c *Console) policyPrint() uint64 {
	h := fnv.New64a()
	if p := currentPolicy(c); p != nil {
		fmt.Fprint(h, p.Revision())
	}
	return h.Sum64() | 1
}

func (c *Console) grantsPrint(ctx context.Context) uint64 {
	h := fnv.New64a()
	if g := c.sources().Workspace.Approvals(); g != nil {
		all, err := g.List(ctx)
		fmt.Fprint(h, err)
		for _, gr := range all {
			fmt.Fprintln(h, gr.ID)
		}
	}
	return h.Sum64() | 1
}
