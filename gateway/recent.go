package gateway

import "time"

// recentSet keeps a value by key for a while (ttl), put by an owner (a
// caller), bounded in count: in all (max), and per owner (perOwner).
// What it holds is put there by remote parties, so neither a flood of
// one caller nor of all of them grows it beyond its bounds. When the set
// is full the oldest entry goes; when an owner has its perOwner entries,
// its oldest goes (evictOwn) or the new one is not kept. Its zero value
// is not usable (see newRecentSet); it is not safe for concurrent use
// (the tracker's mutex guards it).
type recentSet[V any] struct {
	ttl           time.Duration
	max, perOwner int
	evictOwn      bool

	by     map[string]recentEntry[V]
	order  []recentKey // in the order put; entries taken or replaced stay until pruned
	owners map[string]int
	seq    uint64
}

type recentEntry[V any] struct {
	v     V
	owner string
	at    time.Time
	seq   uint64
}

type recentKey struct {
	key string
	seq uint64
}

func newRecentSet[V any](ttl time.Duration, max, perOwner int, evictOwn bool) recentSet[V] {
	return recentSet[V]{ttl: ttl, max: max, perOwner: perOwner, evictOwn: evictOwn, by: map[string]recentEntry[V]{}, owners: map[string]int{}}
}

// put keeps v under key for owner, from now, in place of what key held.
func (s *recentSet[V]) put(key, owner string, v V, now time.Time) {
	s.prune(now)
	if e, ok := s.by[key]; ok {
		s.remove(key, e)
	}
	if s.owners[owner] >= s.perOwner {
		if !s.evictOwn {
			return
		}
		for _, k := range s.order {
			if e, ok := s.by[k.key]; ok && e.seq == k.seq && e.owner == owner {
				s.remove(k.key, e)
				break
			}
		}
	}
	s.seq++
	s.by[key] = recentEntry[V]{v: v, owner: owner, at: now, seq: s.seq}
	s.order = append(s.order, recentKey{key, s.seq})
	s.owners[owner]++
	s.prune(now)
}

// get returns what key holds, if it was put less than ttl ago.
func (s *recentSet[V]) get(key string, now time.Time) (V, bool) {
	e, ok := s.by[key]
	if !ok || now.Sub(e.at) >= s.ttl {
		var zero V
		return zero, false
	}
	return e.v, true
}

// take reports whether key was put less than ttl ago, and forgets it.
func (s *recentSet[V]) take(key string, now time.Time) bool {
	e, ok := s.by[key]
	if ok {
		s.remove(key, e)
	}
	return ok && now.Sub(e.at) < s.ttl
}

// len returns how many entries the set holds, and how many it keeps in
// its order of arrival (at most twice as many).
func (s *recentSet[V]) len() (entries, order int) { return len(s.by), len(s.order) }

func (s *recentSet[V]) remove(key string, e recentEntry[V]) {
	delete(s.by, key)
	if s.owners[e.owner]--; s.owners[e.owner] <= 0 {
		delete(s.owners, e.owner)
	}
}

// prune drops, oldest first, what expired, and what is beyond the bounds:
// more than max entries, or an order more than twice as long.
func (s *recentSet[V]) prune(now time.Time) {
	for len(s.order) > 0 {
		k := s.order[0]
		e, live := s.by[k.key]
		live = live && e.seq == k.seq
		if live && now.Sub(e.at) < s.ttl && len(s.by) <= s.max && len(s.order) <= 2*s.max {
			return
		}
		s.order[0] = recentKey{}
		s.order = s.order[1:]
		if live {
			s.remove(k.key, e)
		}
	}
	s.order = nil // let the array go
}
