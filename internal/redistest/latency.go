package redistest

import (
	"time"
)

// SetLatency makes the link delay every chunk of bytes it passes, in both
// directions, by d: a one-way latency, as between two regions (a command
// and its reply take 2·d more). Chunks keep their order and are not held
// back by one another: a pipeline of commands sent at once arrives d later,
// at once. It applies to chunks read from then on; 0 ends the delay (chunks
// already delayed still wait). A black hole holds delayed chunks too. Safe
// for concurrent use.
func (l *Link) SetLatency(d time.Duration) { l.latency.Store(int64(max(d, 0))) }

// Latency returns the one-way latency set by SetLatency.
func (l *Link) Latency() time.Duration { return time.Duration(l.latency.Load()) }

// delayLine writes chunks to dst each at its due time, from a goroutine of
// its own, so that the pump keeps reading while earlier chunks wait.
type delayLine struct {
	l      *Link
	chunks chan delayedChunk
	ended  chan struct{} // closed when the writer has stopped
}

type delayedChunk struct {
	due  time.Time
	data []byte
}

func (l *Link) newDelayLine(dst interface{ Write([]byte) (int, error) }) *delayLine {
	d := &delayLine{l: l, chunks: make(chan delayedChunk, 4096), ended: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(d.ended)
		for c := range d.chunks {
			if wait := time.Until(c.due); wait > 0 {
				select {
				case <-time.After(wait):
				case <-l.done:
					return
				}
			}
			if !l.wait() {
				return
			}
			if _, err := dst.Write(c.data); err != nil {
				return
			}
		}
	}()
	return d
}

// send queues a copy of b, due after the link's latency; false when the
// writer has stopped (dst failed or the link closed).
func (d *delayLine) send(b []byte) bool {
	c := delayedChunk{due: time.Now().Add(d.l.Latency()), data: append([]byte(nil), b...)}
	select {
	case d.chunks <- c:
		return true
	case <-d.ended:
		return false
	}
}

// finish lets the queued chunks go out, in time, and returns when they
// have (or the writer stopped): the end of a stream follows its bytes.
func (d *delayLine) finish() {
	close(d.chunks)
	<-d.ended
}
