package rls

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// File is one domain file of envoyproxy/ratelimit's configuration, as written: a domain and its
// tree of descriptors. Unknown keys are errors.
type File struct {
	Domain      string       `yaml:"domain"`      // the RateLimitRequest.domain Envoy sends
	Descriptors []Descriptor `yaml:"descriptors"` // the top level of the descriptor tree
}

// Descriptor is one node of the descriptor tree: it matches one entry of a request's descriptor
// (key, and value when set) and may carry a limit and children for the entries that follow.
type Descriptor struct {
	Key string `yaml:"key"` // required
	// Value, when set, matches only that value (with a trailing '*', any value with that
	// prefix); empty matches any value, after the value-specific siblings.
	Value       string       `yaml:"value"`
	RateLimit   *RateLimit   `yaml:"rate_limit"`  // applies when the request's descriptor ends here
	Descriptors []Descriptor `yaml:"descriptors"` // match the request descriptor's next entry
	ShadowMode  bool         `yaml:"shadow_mode"` // decides and counts, but always answers OK
	// QuotaMode makes the limit one of the call's quotas, as envoyproxy/ratelimit's quota_mode:
	// its descriptor's status is its own, but the call is OVER_LIMIT for the quotas only when
	// every quota_mode descriptor of the call is (src/service/ratelimit.go there).
	QuotaMode bool `yaml:"quota_mode"`
	// DetailedMetric puts the request's values into the metric's endpoint label (still under
	// metrics.max_label_sets).
	DetailedMetric bool `yaml:"detailed_metric"`
}

// RateLimit is a descriptor's limit: requests_per_unit per unit, or unlimited. Algorithm and
// Burst are rl-exporter's additions.
type RateLimit struct {
	// Unit is second, minute, hour, day, week, month (30 days) or year (365 days), in any case;
	// empty when Unlimited.
	Unit            string    `yaml:"unit"`
	RequestsPerUnit uint32    `yaml:"requests_per_unit"` // 0 blocks every request
	Unlimited       bool      `yaml:"unlimited"`         // also hides key-only defaults
	Name            string    `yaml:"name"`              // for Replaces and the answer's current_limit
	Replaces        []Replace `yaml:"replaces"`          // by name, limits it replaces when both apply
	Algorithm       string    `yaml:"algorithm"`         // one of the six; default fixed_window
	// Burst is the bucket size of token_bucket, leaky_bucket and gcra; default RequestsPerUnit.
	Burst int64 `yaml:"burst"`
	// ChargeOnStreamDone takes a positive hits_addend even past the limit: it is the cost Envoy's
	// apply_on_stream_done call reports of a request already served, admitted by a hits_addend 0
	// peek. rl-exporter's addition.
	ChargeOnStreamDone bool `yaml:"charge_on_stream_done"`
}

// Replace names a limit replaced by another.
type Replace struct {
	Name string `yaml:"name"` // the replaced limit's name
}

// unitSpec is a unit of Envoy's RateLimitUnit: its name and its length.
type unitSpec struct {
	name   string
	period time.Duration
}

// unitCodes are the RateLimitUnit codes of the units' names.
var unitCodes = func() map[string]rlsv3.RateLimitResponse_RateLimit_Unit {
	out := make(map[string]rlsv3.RateLimitResponse_RateLimit_Unit, len(units))
	for name := range units {
		out[name] = rlsv3.RateLimitResponse_RateLimit_Unit(rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(name)])
	}
	return out
}()

// unitCode is the RateLimitUnit of a unit's name; UNKNOWN for "" and any other.
func unitCode(name string) rlsv3.RateLimitResponse_RateLimit_Unit { return unitCodes[name] }

// units are Envoy's RateLimitUnit values with the lengths envoyproxy/ratelimit gives them.
var units = map[string]unitSpec{
	"second": {"second", time.Second},
	"minute": {"minute", time.Minute},
	"hour":   {"hour", time.Hour},
	"day":    {"day", 24 * time.Hour},
	"week":   {"week", 7 * 24 * time.Hour},
	"month":  {"month", 30 * 24 * time.Hour},
	"year":   {"year", 365 * 24 * time.Hour},
}

// Rules are the compiled domain files: an immutable tree per domain, safe for concurrent use.
type Rules struct {
	domains map[string]*node
	files   map[string]string // the file of each domain
	Files   []string          // the files loaded, sorted
}

// node is one compiled Descriptor.
type node struct {
	children map[string]*node // "key" or "key_value"
	wildcard []string         // child names ending in '*', in file order
	rule     *rule            // nil: no limit at this node
}

// rule is a compiled RateLimit.
type rule struct {
	path      string // domain and key path, e.g. "messaging.message_type.to_number"
	unlimited bool
	blocked   bool // requests_per_unit: 0, every request over the limit
	shadow    bool
	quota     bool // QuotaMode
	detailed  bool
	name      string
	replaces  []string
	unit      string
	perUnit   uint32
	limit     limiter.Limit
	keySuffix string                 // keeps a limit override's counts apart from the files' rule's
	rendered  decision.RenderedLimit // the limit's header values, under policyName
	charge    bool                   // ChargeOnStreamDone
}

// policyName names the rule in the RateLimit headers: its name, else its path.
func (r *rule) policyName() string {
	if r.name != "" {
		return r.name
	}
	return r.path
}

// LoadDir reads every *.yaml and *.yml file of dir, not hidden and not in subdirectories, as one
// domain each. An error names the file and, for a descriptor, its path in the tree.
func LoadDir(dir string) (*Rules, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("rls config dir: %w", err)
	}
	r := &Rules{domains: map[string]*node{}, files: map[string]string{}}
	owner := r.files
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || (filepath.Ext(name) != ".yaml" && filepath.Ext(name) != ".yml") {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("rls config %s: %w", path, err)
		}
		f, err := ParseFile(path, data)
		if err != nil {
			return nil, err
		}
		if prev, dup := owner[f.Domain]; dup {
			return nil, fmt.Errorf("rls config %s: domain %q is already defined in %s", path, f.Domain, prev)
		}
		n, err := compileFile(path, f)
		if err != nil {
			return nil, err
		}
		owner[f.Domain] = path
		r.domains[f.Domain] = n
		r.Files = append(r.Files, path)
	}
	sort.Strings(r.Files)
	return r, nil
}

// ParseFile decodes one domain file strictly (unknown keys are errors, as in
// envoyproxy/ratelimit); name is for errors.
func ParseFile(name string, data []byte) (File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return f, fmt.Errorf("rls config %s: empty file", name)
		}
		return f, fmt.Errorf("rls config %s: %w", name, err)
	}
	if f.Domain == "" {
		return f, fmt.Errorf("rls config %s: domain: required", name)
	}
	return f, nil
}

// Compile checks f and compiles it into Rules of its domain alone.
func Compile(name string, f File) (*Rules, error) {
	n, err := compileFile(name, f)
	if err != nil {
		return nil, err
	}
	return &Rules{domains: map[string]*node{f.Domain: n}, files: map[string]string{f.Domain: name}, Files: []string{name}}, nil
}

func compileFile(name string, f File) (*node, error) {
	root := &node{children: map[string]*node{}}
	if err := compileLevel(name, f.Domain, root, f.Descriptors); err != nil {
		return nil, err
	}
	return root, nil
}

func compileLevel(file, parent string, into *node, ds []Descriptor) error {
	for i, d := range ds {
		if d.Key == "" {
			return fmt.Errorf("rls config %s: %s.descriptors[%d]: key: required", file, parent, i)
		}
		name := d.Key
		if d.Value != "" {
			name += "_" + d.Value
		}
		path := parent + "." + name
		if _, dup := into.children[name]; dup {
			return fmt.Errorf("rls config %s: %s: duplicate descriptor (key %q, value %q)", file, path, d.Key, d.Value)
		}
		n := &node{children: map[string]*node{}}
		if d.RateLimit != nil {
			r, err := compileRule(d, path)
			if err != nil {
				return fmt.Errorf("rls config %s: %s: rate_limit: %w", file, path, err)
			}
			n.rule = r
		}
		if err := compileLevel(file, path, n, d.Descriptors); err != nil {
			return err
		}
		into.children[name] = n
		if strings.HasSuffix(name, "*") {
			into.wildcard = append(into.wildcard, name)
		}
	}
	return nil
}

func compileRule(d Descriptor, path string) (*rule, error) {
	rl := d.RateLimit
	r := &rule{path: path, shadow: d.ShadowMode, quota: d.QuotaMode, detailed: d.DetailedMetric, name: rl.Name, unlimited: rl.Unlimited, charge: rl.ChargeOnStreamDone}
	for i, rep := range rl.Replaces {
		if rep.Name == "" {
			return nil, fmt.Errorf("replaces[%d]: name: required", i)
		}
		if rep.Name == rl.Name {
			return nil, fmt.Errorf("replaces[%d]: %q is this limit's own name", i, rep.Name)
		}
		r.replaces = append(r.replaces, rep.Name)
	}
	u, ok := units[strings.ToLower(rl.Unit)]
	if rl.Unlimited {
		if rl.Unit != "" || rl.RequestsPerUnit != 0 || rl.Algorithm != "" || rl.Burst != 0 {
			return nil, errors.New("unlimited: no unit, requests_per_unit, algorithm or burst may be set with it")
		}
		return r, nil
	}
	if !ok {
		return nil, fmt.Errorf("unit: %q is not one of second, minute, hour, day, week, month, year", rl.Unit)
	}
	alg := limiter.FixedWindow
	if rl.Algorithm != "" {
		a, err := limiter.ParseAlgorithm(rl.Algorithm)
		if err != nil {
			return nil, fmt.Errorf("algorithm: %w", err)
		}
		alg = a
	}
	if rl.Burst != 0 && !alg.IsBucket() {
		return nil, fmt.Errorf("burst: applies to token_bucket, leaky_bucket and gcra, not %s", alg)
	}
	r.unit, r.perUnit = u.name, rl.RequestsPerUnit
	// Windows start on multiples of the unit, as envoyproxy/ratelimit's: per minute, on the minute.
	r.limit = limiter.Limit{Algorithm: alg, Rate: int64(rl.RequestsPerUnit), Period: u.period, Burst: rl.Burst, AlignWindows: true}
	r.rendered = decision.RenderLimit(r.policyName(), r.limit)
	if rl.RequestsPerUnit == 0 {
		// envoyproxy/ratelimit's way to block: every request is over the limit.
		if rl.Burst != 0 {
			return nil, errors.New("burst: must not be set with requests_per_unit: 0 (which blocks every request)")
		}
		r.blocked = true
		return r, nil
	}
	if err := r.limit.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// Domains returns the domain names, sorted.
func (r *Rules) Domains() []string {
	out := make([]string, 0, len(r.domains))
	for d := range r.domains {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// entry is one key/value of a request's descriptor.
type entry struct{ key, value string }

// match finds the rule of a request's descriptor in domain as envoyproxy/ratelimit does: at each
// level the "key_value" child first, then a wildcard child whose prefix the value has, then the
// key-only child; a rule applies only where the descriptor ends. Nil: not limited.
func (r *Rules) match(domain string, entries []entry) *rule {
	n := r.domains[domain]
	if n == nil || len(entries) == 0 {
		return nil
	}
	var found *rule
	for i, e := range entries {
		next := n.children[e.key+"_"+e.value]
		if next == nil && len(n.wildcard) > 0 {
			kv := e.key + "_" + e.value
			for _, w := range n.wildcard {
				if strings.HasPrefix(kv, strings.TrimSuffix(w, "*")) {
					next = n.children[w]
					break
				}
			}
		}
		if next == nil {
			next = n.children[e.key]
		}
		if next == nil {
			return nil
		}
		if i == len(entries)-1 {
			found = next.rule
			break
		}
		if len(next.children) == 0 {
			return nil
		}
		n = next
	}
	return found
}

// EndpointLimit is a limit as metrics label it: the endpoint (the rule's path through the
// descriptor tree) and the limit enforced there.
type EndpointLimit struct {
	Endpoint string        // the endpoint label of the rule's decisions
	Limit    limiter.Limit // its Rate is 0 when Blocked
	Blocked  bool          // requests_per_unit: 0, which refuses every request
}

// Limits returns the limited (not unlimited) rules, sorted by endpoint; detailed_metric ones,
// labelled by request values when decided, are listed under their path.
func (r *Rules) Limits() []EndpointLimit {
	var out []EndpointLimit
	for _, root := range r.domains {
		walk(root, func(ru *rule) {
			if !ru.unlimited {
				out = append(out, EndpointLimit{Endpoint: ru.path, Limit: ru.limit, Blocked: ru.blocked})
			}
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Endpoint < out[j].Endpoint })
	return out
}
