package config

import "testing"

func TestRlsAllOrNothingIsOffByDefaultAndTheFileTurnsItOn(t *testing.T) {
	if Default().RLS.AllOrNothing {
		t.Error("rls.all_or_nothing is on by default; envoyproxy/ratelimit counts each descriptor on its own")
	}
	c, err := Parse("x.yaml", []byte("rls: {all_or_nothing: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.RLS.AllOrNothing {
		t.Error("rls.all_or_nothing: true decoded as false")
	}
}
