package redisstore

import (
	"os"
	"testing"
)

// TestStoreSendsTheGeneratedSetScript holds the set script the store sends
// to lua/generated/set.lua, byte for byte.
func TestStoreSendsTheGeneratedSetScript(t *testing.T) {
	want, err := os.ReadFile(setPath)
	if err != nil {
		t.Fatalf("%v: run %s", err, regenerate)
	}
	sc, err := setScript()
	if err != nil {
		t.Fatal(err)
	}
	if sc.src != string(want) || sc.sha != newScript(string(want)).sha {
		t.Errorf("the store's set script is not %s", setPath)
	}
}
