package overload

import (
	"errors"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// A config file reports a field out of range by its key, so Validate names
// it as a *limiter.FieldError rather than in text to be split.
func TestValidateNamesTheFieldAtFault(t *testing.T) {
	cfg := Config{Quantile: 0.9, Headroom: 0.5, MinLimit: 2, MaxLimit: 10, InitialLimit: 5, Tolerance: 2, Smoothing: 0.5, LongWindow: 10, MinSamples: 1}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	for field, bad := range map[string]func(*Config){
		"quantile":      func(c *Config) { c.Quantile = 1 },
		"max_limit":     func(c *Config) { c.MaxLimit = 1 },
		"initial_limit": func(c *Config) { c.InitialLimit = 11 },
		"critical_wait": func(c *Config) { c.CriticalWait = time.Hour },
	} {
		c := cfg
		bad(&c)
		var fe *limiter.FieldError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%v: want a *limiter.FieldError on %q", err, field)
		}
	}
}
