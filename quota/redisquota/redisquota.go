// Package redisquota is a quota.Store on Redis: the demands of every rl-exporter replica's
// clients of a shared limit live in one hash, so that each replica divides the limit among the
// clients of all of them (several replicas serving one set of Envoys). It knows nothing of gRPC
// or Prometheus.
//
// Each key is one hash (<prefix>:quota:<key>), one field per client, exchanged by one Lua script
// per call: the replica's clients are recorded, the gone ones deleted, the stale ones dropped,
// and every live one returned, in one round trip. Entries are timed on Redis's clock, so the
// replicas' clocks do not matter; a key no replica exchanges any more expires.
package redisquota

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/quota"
)

//go:embed exchange.lua
var exchangeLua string

// exchangeScript is sent as the store sends its own scripts: by its SHA1, whole on NOSCRIPT.
var exchangeScript = redisstore.NewScript(exchangeLua)

// KeySuffix follows the store's key prefix: "rl:quota:<key>".
const KeySuffix = "quota"

// Store is a quota.Store on Redis. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	prefix string // with its trailing ":quota:"
}

// New returns a Store keeping its hashes under prefix (the store's key prefix, "rl") on client,
// a Cluster's included: each call touches one key.
func New(client redis.UniversalClient, prefix string) *Store {
	return &Store{client: client, prefix: prefix + ":" + KeySuffix + ":"}
}

// Exchange is part of quota.Store. The entries are timed on Redis's clock, not now: a replica
// whose clock is off neither drops the others' entries early nor keeps its own past stale.
func (s *Store) Exchange(ctx context.Context, key string, mine []quota.Demand, gone []string, _ time.Time, stale time.Duration) ([]quota.Demand, error) {
	args := make([]any, 0, 2+2*len(mine)+len(gone))
	args = append(args, stale.Milliseconds(), len(mine))
	for _, d := range mine {
		args = append(args, d.Client, encode(d))
	}
	for _, c := range gone {
		args = append(args, c)
	}
	reply, err := exchangeScript.Run(ctx, s.client, []string{s.prefix + key}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redisquota: exchange %q: %w", key, err)
	}
	out := make([]quota.Demand, 0, len(reply)/2)
	for i := 0; i+1 < len(reply); i += 2 {
		d, err := decode(reply[i], reply[i+1])
		if err != nil {
			return nil, fmt.Errorf("redisquota: exchange %q: %w", key, err)
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Client < out[j].Client })
	return out, nil
}

// encode is a demand as the hash holds it after its time: "<known> <rate>".
func encode(d quota.Demand) string {
	known := "0"
	if d.Known {
		known = "1"
	}
	return known + " " + strconv.FormatFloat(d.Rate, 'g', -1, 64)
}

func decode(client, v string) (quota.Demand, error) {
	known, rate, ok := strings.Cut(v, " ")
	r, err := strconv.ParseFloat(rate, 64)
	if !ok || err != nil || (known != "0" && known != "1") {
		return quota.Demand{}, fmt.Errorf("client %q: entry %q is not \"<known> <rate>\"", client, v)
	}
	return quota.Demand{Client: client, Rate: r, Known: known == "1"}, nil
}
