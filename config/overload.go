package config

import (
	"errors"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/overload"
	"github.com/rl-exporter/rl-exporter/slo"
)

// OverloadTarget says where the overload target comes from: "server.overload.target",
// the SLO spec file, or "" when there is none.
func (c *Config) OverloadTarget() (target time.Duration, quantile float64, source string, err error) {
	o := c.Server.Overload
	if o.Target > 0 || o.SLOSpec == "" {
		if o.Target > 0 {
			source = "server.overload.target"
		}
		return o.Target, o.Quantile, source, nil
	}
	path := c.Path(o.SLOSpec)
	m, err := slo.LoadFile(path)
	if err != nil {
		return 0, 0, "", err
	}
	if m.Overload == nil {
		return 0, o.Quantile, "", nil
	}
	return m.Overload.LatencyThreshold, m.Overload.LatencyQuantile, path, nil
}

// OverloadConfig is server.overload as package overload takes it, the target
// read from the SLO spec when server.overload.target is not set. A problem is
// a *limiter.FieldError naming its key.
func (c *Config) OverloadConfig() (overload.Config, error) {
	o := c.Server.Overload
	target, quantile, _, err := c.OverloadTarget()
	if err != nil {
		return overload.Config{}, &limiter.FieldError{Field: "server.overload.slo_spec", Err: err}
	}
	cfg := o.Config
	cfg.Target, cfg.Quantile = target, quantile
	if err := cfg.Validate(); err != nil {
		var fe *limiter.FieldError
		if errors.As(err, &fe) {
			err = &limiter.FieldError{Field: "server.overload." + fe.Field, Err: fe.Err}
		}
		return cfg, err
	}
	return cfg, nil
}

// Priority is the priority of class's requests on tier: the tier's, else the class's, else default.
func (c *Config) Priority(class, tier string) overload.Priority {
	cl := c.Classes[class]
	s := cl.Priority
	if l, ok := cl.Limits[tier]; ok && l.priority() != "" {
		s = l.priority()
	}
	p, _ := overload.ParsePriority(s)
	return p
}

func (c *Config) validateOverload(e *errs) {
	for _, name := range c.ClassNames() {
		cl := c.Classes[name]
		if _, err := overload.ParsePriority(cl.Priority); err != nil {
			e.add("classes."+name+".priority", "%v", err)
		}
		for tier, l := range cl.Limits {
			if _, err := overload.ParsePriority(l.Priority); err != nil {
				e.add("classes."+name+".limits."+tier+".priority", "%v", err)
			}
		}
	}
	o := c.Server.Overload
	if !o.Enabled {
		return
	}
	if c.Server.Upstream == "" {
		e.add("server.overload.enabled", "needs server.upstream: the limit protects the upstream")
	}
	if o.RetryAfter < time.Second {
		e.add("server.overload.retry_after", "must be at least 1s (Retry-After counts whole seconds), got %s", o.RetryAfter)
	}
	if _, err := c.OverloadConfig(); err != nil {
		e.addField("", err)
	}
}
