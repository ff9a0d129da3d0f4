package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// TestBatchReadsOfKeysUsedOnceRefuseAKeyOfAnotherTypeAsGETDoes: gcra's
// batch script must refuse a key of another type, as the single script's
// GET does, and not overwrite it.
func TestBatchReadsOfKeysUsedOnceRefuseAKeyOfAnotherTypeAsGETDoes(t *testing.T) {
	srv, store := singleStore(t)
	ctx := context.Background()
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 10, Period: time.Second}
	reqs := []*request{
		newRequest(store, "fetch:fresh", lim, 1, limiter.ModeConsume),
		newRequest(store, "fetch:hash", lim, 1, limiter.ModeConsume),
		newRequest(store, "fetch:stored", lim, 1, limiter.ModeConsume),
	}
	if _, err := store.Decide(ctx, "fetch:stored", lim, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do("HSET", reqs[1].keys[0], "f", "v"); err != nil {
		t.Fatal(err)
	}
	keys, args := batchCall(store, reqs)
	sc := store.scriptsOf(limiter.GCRA).batch
	err := store.client.Eval(ctx, sc.src, keys, args...).Err()
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("batch over a hash key: %v, want WRONGTYPE", err)
	}
	if typ, err := srv.Do("TYPE", reqs[1].keys[0]); err != nil || typ != "hash" {
		t.Fatalf("the hash key is now %v (%v)", typ, err)
	}
	// Without it, a fresh and the stored key are decided from one read (the
	// refused call stopped at the hash key: the stored key's decision there
	// was not made).
	fresh := newRequest(store, "fetch:fresh2", lim, 1, limiter.ModeConsume)
	keys, args = batchCall(store, []*request{fresh, reqs[2]})
	reply, err := store.client.Eval(ctx, sc.src, keys, args...).Result()
	if err != nil {
		t.Fatal(err)
	}
	ints, err := anyInts(reply, nil)
	if err != nil || len(ints) != 2*replyLen {
		t.Fatalf("reply %v (%v)", reply, err)
	}
	if fresh, stored := ints[1], ints[replyLen+1]; fresh != 9 || stored != 8 {
		t.Fatalf("remaining %d for the fresh key and %d for the stored one, want 9 and 8", fresh, stored)
	}
}
