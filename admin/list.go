package admin

import (
	"fmt"
	"sort"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/livelimits"
)

// LimitJSON is a limit as the admin API shows it.
type LimitJSON struct {
	Algorithm   limiter.Algorithm `json:"algorithm"`
	MaxRequests int64             `json:"max_requests"`
	Window      string            `json:"window"`
	Burst       int64             `json:"burst,omitempty"`
}

func limitJSON(l limiter.Limit) LimitJSON {
	return LimitJSON{Algorithm: l.Algorithm, MaxRequests: l.Rate, Window: l.Period.String(), Burst: l.Burst}
}

// InForce is the limit one class × tier enforces.
type InForce struct {
	Class string `json:"class"`
	Tier  string `json:"tier"`
	// Limit is the limit's name when the tier has several.
	Limit string `json:"limit,omitempty"`
	// Effective is the limit enforced, in words: "2 per 1h0m0s
	// (fixed_window)", so a tier-wide max_requests shows the window each
	// class keeps.
	Effective  string    `json:"effective"`
	Configured LimitJSON `json:"configured"`
	// Live is the live change's limit, when one applies.
	Live *LimitJSON `json:"live,omitempty"`
	// Source is "file" or the key of the live change.
	Source         string     `json:"source"`
	RolloutPercent int        `json:"rollout_percent"`
	Shadow         bool       `json:"shadow"`
	ExpiresAt      *time.Time `json:"expires_at,omitempty"`
}

// ChangeJSON is one live change as stored.
type ChangeJSON struct {
	Key            string     `json:"key"`
	Class          string     `json:"class,omitempty"`
	Tier           string     `json:"tier"`
	Limit          string     `json:"limit,omitempty"`
	MaxRequests    int64      `json:"max_requests,omitempty"`
	Window         string     `json:"window,omitempty"`
	Burst          int64      `json:"burst,omitempty"`
	Algorithm      string     `json:"algorithm,omitempty"`
	Shadow         bool       `json:"shadow"`
	RolloutPercent int        `json:"rollout_percent"`
	ExpiresAt      *time.Time `json:"expires_at,omitempty"`
	UpdatedBy      string     `json:"updated_by,omitempty"`
	UpdatedAt      *time.Time `json:"updated_at,omitempty"`
	// Error says why the hash's current content is ignored (the values
	// above are then the last good ones, if any).
	Error string `json:"error,omitempty"`
}

// List is the body of every successful answer.
type List struct {
	Limits  []InForce    `json:"limits"`
	Changes []ChangeJSON `json:"changes"`
	// DryRun is true when the answer shows a change that was not made.
	DryRun bool `json:"dry_run,omitempty"`
	// Replaced is the live change a PUT replaced (or would replace).
	Replaced *ChangeJSON `json:"replaced,omitempty"`
	// Note says in words what happened.
	Note string `json:"note,omitempty"`
}

// effective writes a limit as Effective shows it.
func effective(l limiter.Limit) string {
	s := fmt.Sprintf("%d per %s (%s)", l.Rate, l.Period, l.Algorithm)
	if l.Algorithm.IsBucket() && l.Burst > 0 {
		s += fmt.Sprintf(", burst %d", l.Burst)
	}
	return s
}

// storedChange shows the fields of a hash as stored, or its error.
func storedChange(key string, at target, fields map[string]string) *ChangeJSON {
	c := &ChangeJSON{Key: key, Class: at.class, Tier: at.tier, Limit: at.name}
	ch, err := livelimits.ParseFields(fields)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	fillChange(c, ch)
	return c
}

func fillChange(c *ChangeJSON, ch livelimits.Change) {
	c.MaxRequests, c.Burst, c.Algorithm, c.Shadow, c.RolloutPercent = ch.MaxRequests, ch.Burst, string(ch.Algorithm), ch.Shadow, ch.RolloutPercent
	if ch.Window > 0 {
		c.Window = ch.Window.String()
	}
	c.ExpiresAt, c.UpdatedBy, c.UpdatedAt = timePtr(ch.ExpiresAt), ch.UpdatedBy, timePtr(ch.UpdatedAt)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// list shows the limits in force and the changes, narrowed to a tier or a
// class and tier when given.
func (a *API) list(at target) List {
	return a.listWith(a.cfg.Cache.Overlay(), at)
}

// listWith is list with the limits of the overlay ov.
func (a *API) listWith(ov livelimits.Overlay, at target) List {
	class, tier := at.class, at.tier
	out := List{Limits: []InForce{}, Changes: []ChangeJSON{}}
	for _, t := range a.cfg.Cache.Targets() {
		if (tier != "" && t.Tier != tier) || (class != "" && t.Class != class) || (at.name != "" && t.Name != at.name) {
			continue
		}
		in := InForce{Class: t.Class, Tier: t.Tier, Limit: t.Name, Configured: limitJSON(t.Limit), Source: "file", RolloutPercent: 100, Effective: effective(t.Limit)}
		if ap, ok := ov[t.Class][t.At()]; ok {
			l := limitJSON(ap.Limit)
			in.Effective = effective(ap.Limit)
			if ap.RolloutPercent < 100 {
				in.Effective += fmt.Sprintf("; for %d%% of clients", ap.RolloutPercent)
			}
			if ap.Shadow {
				in.Effective += "; shadow: counted, not enforced"
			}
			in.Live, in.Source, in.RolloutPercent, in.Shadow, in.ExpiresAt = &l, ap.Source, ap.RolloutPercent, ap.Shadow, timePtr(ap.ExpiresAt)
		}
		out.Limits = append(out.Limits, in)
	}
	sort.SliceStable(out.Limits, func(i, j int) bool { // a tier's several limits stay in list order
		if out.Limits[i].Class != out.Limits[j].Class {
			return out.Limits[i].Class < out.Limits[j].Class
		}
		return out.Limits[i].Tier < out.Limits[j].Tier
	})
	for _, e := range a.cfg.Cache.Entries() {
		if (tier != "" && e.Tier != tier) || (class != "" && e.Class != class) || (tier != "" && class == "" && e.Class != "") || (at.name != "" && e.Name != at.name) {
			continue
		}
		c := ChangeJSON{Key: e.Key, Class: e.Class, Tier: e.Tier, Limit: e.Name, Error: e.Error}
		if ch := e.Change; ch != nil {
			fillChange(&c, *ch)
		}
		out.Changes = append(out.Changes, c)
	}
	return out
}
