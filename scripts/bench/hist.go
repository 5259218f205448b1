package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// histogram is a fixed-size, lock-free latency histogram in nanoseconds.
// Buckets are log-linear: values below 256 ns are exact, above that every
// power of two is split into 128 equal buckets, so a reported quantile is
// within 0.8% of the true value. Concurrent record calls are safe.
type histogram struct {
	counts [histBuckets]atomic.Uint64
	total  atomic.Uint64
	sum    atomic.Uint64
	max    atomic.Uint64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits // 128
	histBuckets = histSub * (64 - histSubBits + 1)
)

func histIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	shift := bits.Len64(v) - 1 - histSubBits // mantissa v>>shift is in [128, 256)
	return shift*histSub + int(v>>uint(shift))
}

// histValue is the midpoint of bucket i.
func histValue(i int) uint64 {
	if i < 2*histSub {
		return uint64(i)
	}
	shift := i/histSub - 1
	m := uint64(i - shift*histSub)
	return m<<uint(shift) + (uint64(1)<<uint(shift))/2
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	v := uint64(d)
	h.counts[histIndex(v)].Add(1)
	h.total.Add(1)
	h.sum.Add(v)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

func (h *histogram) count() uint64 { return h.total.Load() }

// quantile returns the q-quantile (0 < q <= 1); zero when empty.
func (h *histogram) quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			v := histValue(i)
			if m := h.max.Load(); v > m {
				v = m
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max.Load())
}

func (h *histogram) mean() time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// latencySummary is what the report keeps of a histogram, in milliseconds.
type latencySummary struct {
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	// Quantiles is the latency distribution at plotQuantiles (the
	// latency-percentile plots).
	Quantiles []quantilePoint `json:"quantiles,omitempty"`
}

// quantilePoint is one quantile of a latency distribution.
type quantilePoint struct {
	Q  float64 `json:"q"`
	Ms float64 `json:"ms"`
}

// plotQuantiles are the quantiles kept for the plots: up to p99.99 and the
// maximum (q = 1).
var plotQuantiles = []float64{0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 1}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (h *histogram) summary() *latencySummary {
	if h.count() == 0 {
		return nil
	}
	s := &latencySummary{
		Count:  h.count(),
		MeanMs: ms(h.mean()),
		P50Ms:  ms(h.quantile(0.50)),
		P99Ms:  ms(h.quantile(0.99)),
		P999Ms: ms(h.quantile(0.999)),
		MaxMs:  ms(time.Duration(h.max.Load())),
	}
	for _, q := range plotQuantiles {
		v := ms(h.quantile(q))
		if q == 1 {
			v = s.MaxMs
		}
		s.Quantiles = append(s.Quantiles, quantilePoint{Q: q, Ms: v})
	}
	return s
}
