// Package livelimits holds the limits changed at run time, without a
// deploy: per plan tier, and per route class × plan tier, a hash in the
// store (Redis) overrides the configured limit, and every instance keeps the
// hashes in memory, so no decision waits for a read of its limit.
//
// Keys, with the default prefix "rl":
//
//	rl:config:<tier>           applies to every class for that tier
//	rl:config:<class>:<tier>   applies to one class and tier, and wins over the tier's hash
//
// Fields (all optional; a missing one keeps the configured value):
//
//	max_requests     requests per window (the limit's rate)
//	window           the window or refill period, a Go duration ("1m")
//	rate             "<n>/<duration>" ("10/1s"), instead of max_requests and window
//	burst            the bucket size of token_bucket, leaky_bucket and gcra
//	algorithm        one of the six algorithms
//	shadow           "true": evaluate beside the configured limit, never refuse
//	rollout_percent  0 to 100 (default 100): the share of clients covered
//	expires_at       RFC 3339 time after which the configured limit returns
//	updated_by, updated_at   who changed it and when (informative)
//
// Instances learn of a change through pub/sub on the channel "rl:config"
// (the message is the key) within milliseconds, and re-read every hash
// periodically in case a message was lost while disconnected. A hash that
// fails validation — exactly the validation of the config file — is ignored
// and reported; the last good value of that hash keeps applying. An expired
// change stops applying on every instance by its own timer, without Redis.
package livelimits

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// The fields of a live-limit hash.
const (
	FieldMaxRequests    = "max_requests"
	FieldWindow         = "window"
	FieldRate           = "rate"
	FieldBurst          = "burst"
	FieldAlgorithm      = "algorithm"
	FieldShadow         = "shadow"
	FieldRolloutPercent = "rollout_percent"
	FieldExpiresAt      = "expires_at"
	FieldUpdatedBy      = "updated_by"
	FieldUpdatedAt      = "updated_at"
)

// Change is one live change: the content of one hash. Zero fields are
// unset (the configured value applies). It is a plain value.
type Change struct {
	// MaxRequests replaces the limit's rate (requests per window); 0: unset.
	MaxRequests int64 `json:"max_requests,omitempty"`
	// Window replaces the limit's period; 0: unset.
	Window time.Duration `json:"-"`
	// Burst replaces the bucket size; 0: unset.
	Burst int64 `json:"burst,omitempty"`
	// Algorithm replaces the algorithm; "": unset.
	Algorithm limiter.Algorithm `json:"algorithm,omitempty"`
	// Shadow runs the change beside the configured limit without refusing.
	Shadow bool `json:"shadow"`
	// RolloutPercent is the share of clients covered, 0 to 100.
	RolloutPercent int `json:"rollout_percent"`
	// ExpiresAt, when set, is when the change stops applying.
	ExpiresAt time.Time `json:"-"`
	// UpdatedBy and UpdatedAt say who made the change and when.
	UpdatedBy string    `json:"updated_by,omitempty"`
	UpdatedAt time.Time `json:"-"`
}

// ParseFields reads a hash strictly: an unknown field or a value that does
// not parse is an error naming the field.
func ParseFields(fields map[string]string) (Change, error) {
	c := Change{RolloutPercent: 100}
	rate := ""
	for _, f := range sortedKeys(fields) {
		v := strings.TrimSpace(fields[f])
		var err error
		switch f {
		case FieldMaxRequests:
			c.MaxRequests, err = positiveInt(v)
		case FieldWindow:
			c.Window, err = positiveDuration(v)
		case FieldRate:
			rate = v
		case FieldBurst:
			c.Burst, err = positiveInt(v)
		case FieldAlgorithm:
			c.Algorithm, err = limiter.ParseAlgorithm(v)
		case FieldShadow:
			c.Shadow, err = strconv.ParseBool(v)
		case FieldRolloutPercent:
			var n int64
			n, err = strconv.ParseInt(v, 10, 64)
			if err == nil && (n < 0 || n > 100) {
				err = fmt.Errorf("must be 0 to 100, got %d", n)
			}
			c.RolloutPercent = int(n)
		case FieldExpiresAt:
			c.ExpiresAt, err = time.Parse(time.RFC3339Nano, v)
		case FieldUpdatedBy:
			c.UpdatedBy = v
		case FieldUpdatedAt:
			c.UpdatedAt, err = time.Parse(time.RFC3339Nano, v)
		default:
			return c, fmt.Errorf("%s: unknown field (want %s)", f, strings.Join(knownFields, ", "))
		}
		if err != nil {
			return c, fmt.Errorf("%s: %q: %w", f, v, unwrapNum(err))
		}
	}
	if rate != "" {
		if c.MaxRequests != 0 || c.Window != 0 {
			return c, fmt.Errorf("%s: set either rate or max_requests and window, not both", FieldRate)
		}
		n, per, err := ParseRate(rate)
		if err != nil {
			return c, fmt.Errorf("%s: %q: %w", FieldRate, rate, err)
		}
		c.MaxRequests, c.Window = n, per
	}
	if c.MaxRequests == 0 && c.Window == 0 && c.Burst == 0 && c.Algorithm == "" {
		return c, errors.New("no limit field: set at least one of max_requests, window, rate, burst, algorithm")
	}
	return c, nil
}

var knownFields = []string{FieldMaxRequests, FieldWindow, FieldRate, FieldBurst, FieldAlgorithm, FieldShadow, FieldRolloutPercent, FieldExpiresAt, FieldUpdatedBy, FieldUpdatedAt}

// ParseRate reads "<n>/<duration>" ("100/1m", "10/s").
func ParseRate(s string) (int64, time.Duration, error) {
	ns, ds, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, errors.New(`want "<requests>/<duration>", such as "100/1m"`)
	}
	n, err := positiveInt(strings.TrimSpace(ns))
	if err != nil {
		return 0, 0, fmt.Errorf("requests: %w", unwrapNum(err))
	}
	ds = strings.TrimSpace(ds)
	if ds != "" && (ds[0] < '0' || ds[0] > '9') {
		ds = "1" + ds // "10/s" is 10 per 1s
	}
	d, err := positiveDuration(ds)
	if err != nil {
		return 0, 0, fmt.Errorf("duration: %w", err)
	}
	return n, d, nil
}

func positiveInt(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("must be > 0, got %d", n)
	}
	return n, nil
}

func positiveDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New("not a Go duration (such as 500ms, 1m)")
	}
	if d <= 0 {
		return 0, fmt.Errorf("must be > 0, got %s", d)
	}
	return d, nil
}

func unwrapNum(err error) error {
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return ne.Err
	}
	return err
}

// Fields returns the hash fields of c (the inverse of ParseFields).
func (c Change) Fields() map[string]string {
	f := map[string]string{FieldRolloutPercent: strconv.Itoa(c.RolloutPercent), FieldShadow: strconv.FormatBool(c.Shadow)}
	if c.MaxRequests > 0 {
		f[FieldMaxRequests] = strconv.FormatInt(c.MaxRequests, 10)
	}
	if c.Window > 0 {
		f[FieldWindow] = c.Window.String()
	}
	if c.Burst > 0 {
		f[FieldBurst] = strconv.FormatInt(c.Burst, 10)
	}
	if c.Algorithm != "" {
		f[FieldAlgorithm] = string(c.Algorithm)
	}
	if !c.ExpiresAt.IsZero() {
		f[FieldExpiresAt] = c.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	if c.UpdatedBy != "" {
		f[FieldUpdatedBy] = c.UpdatedBy
	}
	if !c.UpdatedAt.IsZero() {
		f[FieldUpdatedAt] = c.UpdatedAt.UTC().Format(time.RFC3339Nano)
	}
	return f
}

// Apply returns base with the fields c sets replaced.
func (c Change) Apply(base limiter.Limit) limiter.Limit {
	l := base
	if c.Algorithm != "" {
		l.Algorithm = c.Algorithm
	}
	if c.MaxRequests > 0 {
		l.Rate = c.MaxRequests
	}
	if c.Window > 0 {
		l.Period = c.Window
	}
	if c.Burst > 0 {
		l.Burst = c.Burst
	}
	return l
}

// Expired reports whether c has an expiry at or before now.
func (c Change) Expired(now time.Time) bool {
	return !c.ExpiresAt.IsZero() && !now.Before(c.ExpiresAt)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// canonical is a stable text of a hash, to tell whether it changed.
func canonical(m map[string]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m[k])
		b.WriteByte('\n')
	}
	return b.String()
}
