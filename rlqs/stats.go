package rlqs

// RuleStats is what this replica's streams do on the buckets of one rule.
type RuleStats struct {
	Buckets  int     // buckets watched
	Demand   float64 // requests per second the streams reported, allowed and denied
	Assigned float64 // requests per second of the token buckets assigned to them
}

// Stats is a snapshot of the Service for its metrics.
type Stats struct {
	Streams int                  // calls open
	Rules   map[string]RuleStats // by rule path; "" for buckets no limited rule matches
	// Expired counts the assignments that ran out before a renewal was sent, by rule path; every
	// rule of Rules is listed, at zero until its first, so that a counter's first rise shows.
	Expired     map[string]uint64
	StoreErrors uint64 // store exchanges that failed
}

// Stats returns a snapshot of the streams, the demand and shares per rule, and the counts.
// Safe for concurrent use.
func (s *Service) Stats() Stats {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Streams: len(s.streams), Rules: map[string]RuleStats{}, Expired: map[string]uint64{}, StoreErrors: s.storeErrs}
	for _, b := range s.buckets {
		if len(b.meters) == 0 {
			continue
		}
		rs := out.Rules[b.rule.Path]
		rs.Buckets++
		for st, m := range b.meters {
			rs.Demand += m.Demand(st.id, now, s.cfg.Idle).Rate
			rs.Assigned += b.shares[st]
		}
		out.Rules[b.rule.Path] = rs
	}
	for k := range out.Rules {
		out.Expired[k] = 0
	}
	for k, v := range s.expired {
		out.Expired[k] = v
	}
	return out
}
