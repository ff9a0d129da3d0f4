package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// Histogram layout: values below 2^subBucketBits nanoseconds get a bucket
// each; above that, every power of two is split into 2^(subBucketBits-1)
// equal buckets, so a bucket is never wider than 1/64 of its lower bound and
// a reported percentile is within about 0.8% of the recorded value (HDR
// histograms use the same log-linear layout). Values at or above
// 2^maxValueBits ns (about 69 s) are counted in the last bucket.
const (
	subBucketBits  = 7
	subBucketHalf  = 1 << (subBucketBits - 1)
	maxValueBits   = 36
	histogramSlots = (maxValueBits - subBucketBits + 2) * subBucketHalf
)

// Histogram records durations in a fixed array of log-linear buckets: its
// memory does not grow with the number of samples, and Record does not
// allocate.
//
// A Histogram is not safe for concurrent use: give each goroutine its own and
// Merge them when they are done. The zero value is an empty histogram ready
// for use.
type Histogram struct {
	counts [histogramSlots]uint64
	total  uint64
	min    uint64
	max    uint64
	sum    uint64
}

// NewHistogram returns an empty Histogram.
func NewHistogram() *Histogram { return &Histogram{} }

// slotOf returns the bucket of a value in nanoseconds.
func slotOf(v uint64) int {
	if v < 1<<subBucketBits {
		return int(v)
	}
	if v >= 1<<maxValueBits {
		return histogramSlots - 1
	}
	shift := bits.Len64(v) - subBucketBits
	return (shift+1)*subBucketHalf + int(v>>uint(shift)) - subBucketHalf
}

// slotBounds returns the smallest value of a bucket and its width.
func slotBounds(slot int) (low, width uint64) {
	if slot < 1<<subBucketBits {
		return uint64(slot), 1
	}
	shift := slot/subBucketHalf - 1
	sub := uint64(slot%subBucketHalf + subBucketHalf)
	return sub << uint(shift), 1 << uint(shift)
}

// Record adds one duration. Negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[slotOf(v)]++
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total++
	h.sum += v
}

// Merge adds every sample of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.total += o.total
	h.sum += o.sum
}

// Count is the number of recorded durations.
func (h *Histogram) Count() uint64 { return h.total }

// Min is the smallest recorded duration, exactly; 0 when empty.
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Max is the largest recorded duration, exactly; 0 when empty.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the average recorded duration; 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum / h.total)
}

// Quantile returns the duration below or at which the fraction q (0..1) of
// the samples fall, to within the bucket precision (about 0.8%), clamped to
// the exact minimum and maximum. It returns 0 for an empty histogram. Larger
// q never gives a smaller answer.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	if q <= 0 {
		return time.Duration(h.min)
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for slot, c := range h.counts {
		seen += c
		if seen >= rank {
			low, width := slotBounds(slot)
			v := low + (width-1)/2
			v = min(max(v, h.min), h.max)
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}
