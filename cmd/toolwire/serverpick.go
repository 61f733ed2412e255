package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/spelling"
	"github.com/toolwire/toolwire/mcpclient"
)

// serversForTool returns the configured servers whose tools could be
// registered as name (the prefix before "__" says whose), so that a call
// starts those alone and a server that never answers holds up only calls
// of its own tools. A name no enabled server could hold is an error that
// suggests names that could be meant.
func serversForTool(file *config.File, name string) ([]config.Server, error) {
	var match, disabled []config.Server
	for _, s := range file.Servers {
		if !holdsName(s, name) {
			continue
		}
		if s.Disabled {
			disabled = append(disabled, s)
			continue
		}
		match = append(match, s)
	}
	if len(match) > 0 {
		return match, nil
	}
	if len(disabled) > 0 {
		return nil, fmt.Errorf("unknown tool %q: its server %q is disabled in the configuration", name, disabled[0].Name)
	}
	msg := fmt.Sprintf("unknown tool %q: a tool's registered name starts with its server's prefix and \"__\"", name)
	if near := nearHeads(file.Servers, name, 3); len(near) > 0 {
		msg += "; did you mean " + strings.Join(near, ", ") + "?"
	}
	return nil, errors.New(msg)
}

// holdsName reports whether a tool of server s could be registered as
// name: whether name begins with the server's name head, or, for a name
// cut to fit (64 characters), with what of the head such names keep.
func holdsName(s config.Server, name string) bool {
	head := mcpclient.NameHead(s)
	if strings.HasPrefix(name, head) {
		return true
	}
	return len(head) > mcpclient.NameHeadKept && len(name) == 64 && strings.HasPrefix(name, head[:mcpclient.NameHeadKept])
}

// nearHeads suggests names for a name no server holds: the name's own
// part after the closest servers' heads, by the spelling of the prefix
// it has ("evrything__echo": everything__echo), or after each server's
// head when it has none ("echo": demo__echo).
func nearHeads(servers []config.Server, name string, n int) []string {
	prefix, rest, found := strings.Cut(name, "__")
	if !found {
		prefix, rest = "", name
	}
	type cand struct {
		name string
		dist int
	}
	var cs []cand
	for _, s := range servers {
		if s.Disabled {
			continue
		}
		head := mcpclient.NameHead(s)
		d := 0
		if found {
			want := strings.ToLower(prefix)
			d = spelling.Distance(want, strings.ToLower(strings.TrimSuffix(head, "__")))
			if d > max(1, len(want)/3) {
				continue
			}
		}
		cs = append(cs, cand{head + rest, d})
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return cmp.Or(a.dist-b.dist, strings.Compare(a.name, b.name)) })
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// withServers returns a copy of file that configures only servers, with
// the warnings about the others left out.
func withServers(file *config.File, servers []config.Server) *config.File {
	f := *file
	f.Servers = servers
	if len(file.WarningDetails) != len(file.Warnings) {
		return &f // not one detail per warning: keep them all
	}
	kept := map[string]bool{"": true}
	for _, s := range servers {
		kept[s.Name] = true
	}
	f.Warnings, f.WarningDetails = nil, nil
	for i, w := range file.WarningDetails {
		if kept[w.Server] {
			f.Warnings = append(f.Warnings, file.Warnings[i])
			f.WarningDetails = append(f.WarningDetails, w)
		}
	}
	return &f
}

// serversNamed returns the configured servers with the given names, in
// configuration order; a name not configured, or disabled, is an error
// that suggests the closest configured names.
func serversNamed(file *config.File, names []string) ([]config.Server, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []config.Server
	known := map[string]config.Server{}
	var all []string
	for _, s := range file.Servers {
		known[s.Name] = s
		all = append(all, s.Name)
		if want[s.Name] && !s.Disabled {
			out = append(out, s)
		}
	}
	for _, n := range names {
		s, ok := known[n]
		switch {
		case !ok:
			msg := fmt.Sprintf("--server %q: no such server in the configuration", n)
			if near := closestWords(n, all, 3); len(near) > 0 {
				msg += "; did you mean " + strings.Join(near, ", ") + "?"
			}
			return nil, errors.New(msg)
		case s.Disabled:
			return nil, fmt.Errorf("--server %q: the server is disabled in the configuration", n)
		}
	}
	return out, nil
}

// closestWords returns up to n of words within a third of word's length
// in edits (case-insensitive), closest first.
func closestWords(word string, words []string, n int) []string {
	type cand struct {
		word string
		dist int
	}
	want := strings.ToLower(word)
	var cs []cand
	for _, w := range words {
		if d := spelling.Distance(want, strings.ToLower(w)); d <= max(1, len(want)/3) {
			cs = append(cs, cand{w, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return cmp.Or(a.dist-b.dist, strings.Compare(a.word, b.word)) })
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].word)
	}
	return out
}
