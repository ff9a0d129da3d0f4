package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// setOnly is a store that decides sets but holds no reservation.
type setOnly struct{ limiter.SetStore }

// Reserve needs a store that holds reservations in a set and a wrong number of held flags is
// refused, both with nothing decided; a set of no held part decides as AllowN.
func TestSetReserveRefusesWhatItCannotHold(t *testing.T) {
	ctx := context.Background()
	mem := limiter.NewMemoryStore(limiter.MemoryConfig{})
	newSet := func(st limiter.Store) (*limiter.Set, *limiter.Limiter) {
		a, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.FixedWindow, 10), Store: st})
		if err != nil {
			t.Fatal(err)
		}
		b, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.TokenBucket, 100), Store: st})
		if err != nil {
			t.Fatal(err)
		}
		s, err := limiter.NewSet(a, b)
		if err != nil {
			t.Fatal(err)
		}
		return s, b
	}
	keys, costs := []string{"u:requests", "u:tokens"}, []int64{1, 40}
	out, res := make([]limiter.Decision, 2), make([]limiter.Reservation, 2)

	plain, tokens := newSet(setOnly{mem})
	if plain.Reserves() {
		t.Error("a set on a store without ReserveSet says it Reserves")
	}
	if _, err := plain.Reserve(ctx, keys, costs, []bool{false, true}, out, res); !errors.Is(err, limiter.ErrReservationsNotSupported) {
		t.Errorf("holding on a store without ReserveSet: %v, want ErrReservationsNotSupported", err)
	}
	if d, err := mem.DecideMode(ctx, "u:tokens", tokens.Limit(), 1, limiter.ModePeek, 0); err != nil || d.Remaining != 100 {
		t.Errorf("after the refused Reserve: %+v, %v; want nothing taken", d, err)
	}
	if ok, err := plain.Reserve(ctx, keys, costs, []bool{false, false}, out, res); err != nil || !ok || res[1].ID != "" || out[1].Admitted != 40 {
		t.Errorf("holding nothing: %v, %v, %+v, %+v; want AllowN's answer and no reservation", ok, err, out, res)
	}

	s, _ := newSet(mem)
	if !s.Reserves() {
		t.Error("a set on the memory store does not say it Reserves")
	}
	if _, err := s.Reserve(ctx, keys, costs, []bool{true}, out, res); err == nil {
		t.Error("one held flag for two limiters: no error")
	}
	ok, err := s.Reserve(ctx, keys, costs, []bool{false, true}, out, res)
	if err != nil || !ok || res[0].ID != "" || res[1].ID == "" || res[1].Key != "u:tokens" || res[1].Estimate != 40 ||
		time.Until(res[1].Expires) <= 0 {
		t.Fatalf("Reserve: %v, %v, %+v", ok, err, res)
	}
	if st, err := s.Limiter(1).Commit(ctx, res[1], 55); err != nil || st.Charged != 15 {
		t.Errorf("Commit(55) of 40: %+v, %v; want 15 charged", st, err)
	}
}
