package redisstore_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine started by them is
// still running once they have ended and the store's idle senders have had
// the time they take to exit.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(settled{m})
}

// senderExit is how long an idle batch sender takes to exit (senderIdle in
// batch.go), with a margin: a sender that has just taken its last batch is
// not a leak, but one still running after this is.
const senderExit = 3 * time.Second

// settled runs the tests, then waits (at most senderExit) for the
// goroutines they started to end, so that the leak check that follows sees
// only those that never will.
type settled struct{ m *testing.M }

func (s settled) Run() int {
	code := s.m.Run()
	deadline := time.Now().Add(senderExit)
	for goleak.Find() != nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	return code
}
