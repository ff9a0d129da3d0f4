// Package capacity is an upstream of bounded capacity, for demos and tests of
// overload: a fixed number of workers each hold a request for a service time,
// and the requests beyond them queue in arrival order, so that latency grows
// once more requests are in flight than there are workers.
package capacity

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Upstream serves requests with Workers workers. It is safe for concurrent use.
type Upstream struct {
	workers     chan struct{}
	serviceTime time.Duration
	next        http.Handler
	served      atomic.Uint64
	inFlight    atomic.Int64
	peak        atomic.Int64
}

// New returns an Upstream of workers workers, each holding a request for
// serviceTime before next answers it: at most workers/serviceTime requests per second.
func New(workers int, serviceTime time.Duration, next http.Handler) *Upstream {
	return &Upstream{workers: make(chan struct{}, max(workers, 1)), serviceTime: serviceTime, next: next}
}

// ServeHTTP queues r for a worker, holds it for the service time and lets
// next answer. A request whose client goes away leaves the queue at once, or
// its worker when in service, and is not counted as served.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := u.inFlight.Add(1)
	defer u.inFlight.Add(-1)
	for p := u.peak.Load(); n > p && !u.peak.CompareAndSwap(p, n); p = u.peak.Load() {
	}
	ctx := r.Context()
	select {
	case u.workers <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-u.workers }()
	t := time.NewTimer(u.serviceTime)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return
	}
	u.next.ServeHTTP(w, r)
	u.served.Add(1)
}

// Served returns the requests answered so far: the upstream's goodput.
func (u *Upstream) Served() uint64 { return u.served.Load() }

// InFlight returns the requests queued or in service now.
func (u *Upstream) InFlight() int { return int(u.inFlight.Load()) }

// PeakInFlight returns the most requests queued or in service at once so far.
func (u *Upstream) PeakInFlight() int { return int(u.peak.Load()) }
