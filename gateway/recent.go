package gateway

import "time"

// recentSet keeps keys for a while (ttl), each put by an owner (a
// caller), bounded in count: in all (max), and per owner (perOwner).
// What it holds is put there by remote parties, so neither a flood of
// one caller nor of all of them grows it beyond its bounds. When the set
// is full the oldest key goes; when an owner has its perOwner keys, the
// new one is not kept (an owner's flood costs only that owner). Its zero
// value is not usable (see newRecentSet); it is not safe for concurrent
// use (the tracker's mutex guards it).
type recentSet struct {
	ttl           time.Duration
	max, perOwner int

	by     map[string]recentEntry
	order  []recentKey // in the order put; keys taken or put again stay until pruned
	owners map[string]int
	seq    uint64
}

type recentEntry struct {
	owner string
	at    time.Time
	seq   uint64
}

type recentKey struct {
	key string
	seq uint64
}

func newRecentSet(ttl time.Duration, max, perOwner int) recentSet {
	return recentSet{ttl: ttl, max: max, perOwner: perOwner, by: map[string]recentEntry{}, owners: map[string]int{}}
}

// put keeps key for owner, from now.
func (s *recentSet) put(key, owner string, now time.Time) {
	s.prune(now)
	if e, ok := s.by[key]; ok {
		s.remove(key, e)
	}
	if s.owners[owner] >= s.perOwner {
		return
	}
	s.seq++
	s.by[key] = recentEntry{owner: owner, at: now, seq: s.seq}
	s.order = append(s.order, recentKey{key, s.seq})
	s.owners[owner]++
	s.prune(now)
}

// take reports whether key was put less than ttl ago, and forgets it.
func (s *recentSet) take(key string, now time.Time) bool {
	e, ok := s.by[key]
	if ok {
		s.remove(key, e)
	}
	return ok && now.Sub(e.at) < s.ttl
}

// len returns how many keys the set holds, and how many it keeps in its
// order of arrival (at most twice as many as max).
func (s *recentSet) len() (keys, order int) { return len(s.by), len(s.order) }

func (s *recentSet) remove(key string, e recentEntry) {
	delete(s.by, key)
	if s.owners[e.owner]--; s.owners[e.owner] <= 0 {
		delete(s.owners, e.owner)
	}
}

// prune drops, oldest first, what expired, and what is beyond the bounds:
// more than max keys, or an order more than twice as long.
func (s *recentSet) prune(now time.Time) {
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
