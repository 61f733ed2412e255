package console

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/toolwire/toolwire/gateway"
)

// observed is what the console has seen of the HTTP gateway's events: the
// sessions each caller has open on this process, and the refusals of the
// limits. It starts empty when the console starts.
type observed struct {
	mu       sync.Mutex
	callers  map[string]*callerSessions
	refusals []refusal      // the latest, oldest first, at most maxRefusals
	counts   map[string]int // refusals by limit since the start
	lastHit  map[string]time.Time
}

type callerSessions struct {
	Caller         string
	Open           int
	Opened, Closed int
	LastOpened     time.Time
}

// refusal is one call or session refused by a limit.
type refusal struct {
	Time   time.Time
	Kind   gateway.EventKind
	Caller string
	Limit  string
	Tool   string
}

const (
	maxRefusals = 50
	maxCallers  = 1000 // callers with no session open are forgotten beyond
)

func newObserved() *observed {
	return &observed{callers: map[string]*callerSessions{}, counts: map[string]int{}, lastHit: map[string]time.Time{}}
}

// add records ev, seen at now, and reports whether a page shows it.
func (o *observed) add(ev gateway.Event, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch ev.Kind {
	case gateway.SessionOpened:
		cs := o.caller(ev.Caller)
		cs.Open++
		cs.Opened++
		cs.LastOpened = now
	case gateway.SessionClosed:
		cs := o.caller(ev.Caller)
		cs.Closed++
		if cs.Open > 0 {
			cs.Open--
		}
	case gateway.SessionRefused, gateway.CallRefused:
		o.refusals = append(o.refusals, refusal{Time: now, Kind: ev.Kind, Caller: ev.Caller, Limit: ev.Limit, Tool: ev.Tool})
		if len(o.refusals) > maxRefusals {
			o.refusals = slices.Delete(o.refusals, 0, len(o.refusals)-maxRefusals)
		}
		o.counts[ev.Limit]++
		o.lastHit[ev.Limit] = now
	default:
		return false
	}
	return true
}

func (o *observed) caller(key string) *callerSessions {
	cs := o.callers[key]
	if cs == nil {
		if len(o.callers) >= maxCallers {
			for k, c := range o.callers {
				if c.Open == 0 {
					delete(o.callers, k)
				}
			}
		}
		cs = &callerSessions{Caller: key}
		o.callers[key] = cs
	}
	return cs
}

// sessions returns the callers that have a session open, most sessions
// first, and the total.
func (o *observed) sessions() ([]callerSessions, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []callerSessions
	total := 0
	for _, cs := range o.callers {
		if cs.Open > 0 {
			out = append(out, *cs)
			total += cs.Open
		}
	}
	slices.SortFunc(out, func(a, b callerSessions) int {
		return cmp.Or(cmp.Compare(b.Open, a.Open), cmp.Compare(a.Caller, b.Caller))
	})
	return out, total
}

// limitHits returns the refusals by limit and the latest refusals,
// newest first.
func (o *observed) limitHits() (counts map[string]int, last map[string]time.Time, recent []refusal) {
	o.mu.Lock()
	defer o.mu.Unlock()
	recent = slices.Clone(o.refusals)
	slices.Reverse(recent)
	counts, last = make(map[string]int, len(o.counts)), make(map[string]time.Time, len(o.lastHit))
	for k, v := range o.counts {
		counts[k] = v
		last[k] = o.lastHit[k]
	}
	return counts, last, recent
}
