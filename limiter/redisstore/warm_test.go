package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

func TestWarmLoadsEveryScriptAndOpensTheDecisionsConnections(t *testing.T) {
	for _, c := range []struct {
		name    string
		cluster bool
	}{
		{"a single server", false},
		{"a Cluster of three masters", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cc ClientConfig
			var servers []*redistest.Server
			if c.cluster {
				cl := redistest.Cluster(t, 3)
				cc.ClusterAddrs = cl.Addrs
				servers = cl.Nodes
			} else {
				srv := redistest.Single(t)
				cc.URL = srv.URL()
				servers = []*redistest.Server{srv}
			}
			s := NewTestStore(t, cc, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Warm(ctx); err != nil {
				t.Fatal(err)
			}
			for _, srv := range servers {
				for i := range s.algs {
					for _, sc := range []script{s.algs[i].single, s.algs[i].batch} {
						got, err := srv.Do("SCRIPT", "EXISTS", sc.sha)
						if err != nil {
							t.Fatal(err)
						}
						if exists, _ := got.([]any); len(exists) != 1 || exists[0] != int64(1) {
							t.Errorf("%s: %s's script %s not loaded after Warm: SCRIPT EXISTS %v", srv.Addr(), s.algs[i].spec, sc.sha, got)
						}
					}
				}
			}
			if !c.cluster {
				want := len(s.alone) + int(s.batch.senders)
				if idle := s.client.(*redis.Client).PoolStats().IdleConns; int(idle) < want {
					t.Errorf("%d idle connections after Warm, want the %d that decisions hold at once (a sender each, %d for decisions sent alone)", idle, want, len(s.alone))
				}
			}
		})
	}
}
