package httplimit

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// LiveAt is the key of Class.Live for a live change of the limit named name of tier's several
// limits (TierLimits): "<tier>:<name>", as the change's store key ends.
func LiveAt(tier, name string) string { return tier + ":" + name }

// splitLiveAt is LiveAt's inverse; listed is false for a tier's own key.
func splitLiveAt(key string) (tier, name string, listed bool) {
	return strings.Cut(key, ":")
}

// compileSetLive puts c's live changes of single limits of its tiers' lists (LiveAt keys) in
// force: each such tier gets a tierSet of its own whose clients pick, by rollout bucket, the
// variant holding the changes that cover them. A tier that shares the default tier's list gets
// its own copy, so that a change of one tier leaves the other's alone.
func (cl *class) compileSetLive(p *Policy, cfg PolicyConfig, c Class) error {
	byTier := map[string]map[string]decision.LiveLimit{}
	for key, lv := range c.Live {
		tier, name, listed := splitLiveAt(key)
		if !listed {
			continue
		}
		if !p.tiers[tier] {
			return fmt.Errorf("policy: class %q: live limit %s for unknown tier %q", c.Name, lv.Source, tier)
		}
		if byTier[tier] == nil {
			byTier[tier] = map[string]decision.LiveLimit{}
		}
		byTier[tier][name] = lv
	}
	for tier, changes := range byTier {
		base := cl.setFor(tier)
		if base == nil {
			return fmt.Errorf("policy: class %q tier %q: live limit of %q, but the tier has one limit: address it by the tier alone", c.Name, tier, sortedNames(changes))
		}
		ts, err := base.withLive(cfg, c, tier, changes)
		if err != nil {
			return fmt.Errorf("policy: class %q tier %q: %w", c.Name, tier, err)
		}
		cl.sets[tier] = ts
	}
	return nil
}

// liveEntry is a live change of one limit of a tierSet, with its limiter.
type liveEntry struct {
	decision.LiveLimit
	lim *limiter.Limiter
}

// withLive is a copy of ts with changes (by limit name) in force: per rollout bucket, the variant
// of ts whose covered limits take their change, enforced in place of the configured limit or, in
// shadow, decided beside it on a key of its own. At most one variant per distinct rollout
// percent is built.
func (ts *tierSet) withLive(cfg PolicyConfig, c Class, tier string, changes map[string]decision.LiveLimit) (*tierSet, error) {
	entries := make([]*liveEntry, len(ts.parts))
	for name, lv := range changes {
		i := ts.partIndex(name)
		if i < 0 {
			if ts.lease != nil && ts.lease.name == name {
				return nil, fmt.Errorf("live limit %s: %s is a concurrency limit, which no live change sets", lv.Source, name)
			}
			return nil, fmt.Errorf("live limit %s: no limit named %q (%s)", lv.Source, name, ts.names())
		}
		if err := lv.Validate(); err != nil {
			return nil, err
		}
		l, err := c.newLimiter(cfg, tier, lv.Limit)
		if err != nil {
			return nil, fmt.Errorf("live limit %s: %w", lv.Source, err)
		}
		entries[i] = &liveEntry{LiveLimit: lv, lim: l}
	}
	out := *ts
	out.live = entries
	out.byBucket = new([100]*tierSet)
	variants := map[string]*tierSet{}
	for b := range out.byBucket {
		mask := make([]byte, len(entries))
		for i, e := range entries {
			mask[i] = '0'
			if e != nil && e.CoversBucket(b) {
				mask[i] = '1'
			}
		}
		v, ok := variants[string(mask)]
		if !ok {
			var err error
			if v, err = ts.variant(entries, mask); err != nil {
				return nil, err
			}
			variants[string(mask)] = v
		}
		out.byBucket[b] = v
	}
	return &out, nil
}

// variant is ts with the changes of entries that mask marks ('1') in force.
func (ts *tierSet) variant(entries []*liveEntry, mask []byte) (*tierSet, error) {
	var enforced, shadowed []tierPart
	for i, part := range ts.parts {
		e := entries[i]
		shadow := ts.shadow || i >= ts.enforced
		if e != nil && mask[i] == '1' {
			changed := part
			changed.lim, changed.live = e.lim, e.Source
			changed.rendered = decision.RenderLimit(part.name, e.Limit)
			if e.Shadow {
				changed.suffix = decision.ShadowSuffix
				shadowed = append(shadowed, changed)
			} else {
				part = changed
			}
		}
		if shadow {
			shadowed = append(shadowed, part)
		} else {
			enforced = append(enforced, part)
		}
	}
	v := &tierSet{lease: ts.lease, reads: ts.reads}
	if ts.shadow {
		enforced, shadowed = append(enforced, shadowed...), nil
	}
	if err := v.assemble(enforced, shadowed, ts.shadow); err != nil {
		return nil, err
	}
	return v, nil
}

// forClient is the variant of ts that decides client's requests: ts itself unless a live change
// of one of its limits covers some clients.
func (ts *tierSet) forClient(client string) *tierSet {
	if ts.byBucket == nil {
		return ts
	}
	return ts.byBucket[decision.RolloutBucket(client)]
}

// partIndex is the index in ts.parts of the limit named name, -1 when none.
func (ts *tierSet) partIndex(name string) int {
	for i, p := range ts.parts {
		if p.name == name {
			return i
		}
	}
	return -1
}

// names lists ts's limits' names, its concurrency limit's included, for messages.
func (ts *tierSet) names() string {
	var out []string
	for _, p := range ts.parts {
		out = append(out, p.name)
	}
	if ts.lease != nil {
		out = append(out, ts.lease.name)
	}
	return strings.Join(out, ", ")
}

// sortedNames lists the names of changes, for messages.
func sortedNames(changes map[string]decision.LiveLimit) string {
	var out []string
	for n := range changes {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
