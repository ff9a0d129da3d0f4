package rls

import (
	"sort"
	"strings"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// QuotaRule is the rule a Rate Limit Quota Service bucket is matched to (Rules.MatchBucket): the
// limit its Envoys share. Exactly one of Blocked, Unlimited and a positive Limit.Rate holds.
type QuotaRule struct {
	Path      string        // the rule's path through the descriptor tree, its endpoint label
	File      string        // the domain file that holds it
	Limit     limiter.Limit // the rule's limit; its Rate is 0 when Blocked or Unlimited
	Blocked   bool          // requests_per_unit: 0: every request refused
	Unlimited bool          // unlimited: true, or shadow_mode: every request allowed
	// Refused, when set, says why the rule cannot be a shared quota; a bucket of it is
	// answered as Unlimited.
	Refused string
}

// MatchBucket finds the rule of a bucket's key/value pairs in domain, as match does a request's
// descriptor: the pairs are the descriptor's entries, taken in the order the domain file nests
// their keys (a map has none of its own); at each level the "key_value" child first, then a
// wildcard child, then the key-only child, trying the pairs in key order. A rule applies only
// where every pair is used. False: no rule.
func (r *Rules) MatchBucket(domain string, bucket map[string]string) (QuotaRule, bool) {
	n := r.domains[domain]
	if n == nil || len(bucket) == 0 {
		return QuotaRule{}, false
	}
	keys := make([]string, 0, len(bucket))
	for k := range bucket {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ru := matchSet(n, keys, bucket)
	if ru == nil {
		return QuotaRule{}, false
	}
	return quotaRule(ru, r.files[domain]), true
}

// matchSet finds the rule at the end of a path through n's subtree that uses every key of left.
func matchSet(n *node, left []string, bucket map[string]string) *rule {
	for i, k := range left {
		rest := make([]string, 0, len(left)-1)
		rest = append(append(rest, left[:i]...), left[i+1:]...)
		for _, next := range children(n, k, bucket[k]) {
			if len(rest) == 0 {
				if next.rule != nil {
					return next.rule
				}
				continue
			}
			if ru := matchSet(next, rest, bucket); ru != nil {
				return ru
			}
		}
	}
	return nil
}

// children are n's children matching key and value, in match's order of preference.
func children(n *node, key, value string) []*node {
	var out []*node
	kv := key + "_" + value
	if c := n.children[kv]; c != nil {
		out = append(out, c)
	}
	for _, w := range n.wildcard {
		if strings.HasPrefix(kv, strings.TrimSuffix(w, "*")) {
			out = append(out, n.children[w])
			break
		}
	}
	if c := n.children[key]; c != nil {
		out = append(out, c)
	}
	return out
}

// quotaRule is ru as a QuotaRule of file. A limit Envoy's token bucket cannot hold is refused:
// a concurrency limit (a lease Envoy never gives back) and a charge taken after the response
// (RLQS reports no cost).
func quotaRule(ru *rule, file string) QuotaRule {
	q := QuotaRule{Path: ru.path, File: file, Limit: ru.limit, Blocked: ru.blocked, Unlimited: ru.unlimited || ru.shadow}
	switch {
	case q.Unlimited:
		q.Blocked, q.Limit = false, limiter.Limit{}
	case ru.limit.Algorithm == limiter.Concurrency:
		q.Refused = "a concurrency limit is a lease Envoy's quota filter never gives back"
	case ru.charge:
		q.Refused = "charge_on_stream_done: a quota report carries no cost"
	}
	return q
}

// QuotaRules returns every rule as a Rate Limit Quota Service bucket would be matched to it,
// sorted by path: what `rl-exporter check` lists, and refuses when Refused is set.
func (r *Rules) QuotaRules() []QuotaRule {
	var out []QuotaRule
	for domain, root := range r.domains {
		walk(root, func(ru *rule) { out = append(out, quotaRule(ru, r.files[domain])) })
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
