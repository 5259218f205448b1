package quota

import (
	"math"
	"time"
)

// TokenBucket is one rate limit: a steady rate (tokens per second) and a
// burst (the most tokens it holds). It starts full, so a client that was
// idle spends its burst at full speed before the steady rate applies.
//
// It is a pure value: no clock, no lock. Time arrives as now; the owner
// (Manager, or a share group's limiter) serialises access. A rate of
// zero or less means unlimited.
type TokenBucket struct {
	rate   float64 // tokens per second
	burst  float64 // capacity
	tokens float64 // may go negative: debt paid back before more is taken
	last   time.Time
}

// NewTokenBucket returns a full bucket. A burst of zero or less means one
// second of the rate.
func NewTokenBucket(rate, burst float64, now time.Time) *TokenBucket {
	b := &TokenBucket{last: now}
	b.SetLimit(rate, burst)
	b.tokens = b.burst
	return b
}

// SetLimit changes the rate and burst, keeping the tokens (clamped to the
// new burst), so a changed quota applies at once.
func (b *TokenBucket) SetLimit(rate, burst float64) {
	if burst <= 0 {
		burst = rate
	}
	b.rate, b.burst = rate, burst
	b.tokens = min(b.tokens, burst)
}

func (b *TokenBucket) unlimited() bool { return b.rate <= 0 || math.IsInf(b.rate, 1) }

// refill adds the tokens earned since the last call.
func (b *TokenBucket) refill(now time.Time) {
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(b.burst, b.tokens+dt*b.rate)
		b.last = now
	}
}

// wait is how long until the bucket holds want tokens (zero if it does).
func (b *TokenBucket) wait(want float64) time.Duration {
	if b.tokens >= want || b.unlimited() {
		return 0
	}
	return time.Duration((want - b.tokens) / b.rate * float64(time.Second))
}

// Take spends n tokens unconditionally (throttle mode: what was accepted
// is never refused) and returns how long the caller must back off until
// the bucket is out of debt. Below the rate it returns zero.
func (b *TokenBucket) Take(now time.Time, n float64) time.Duration {
	if b.unlimited() {
		return 0
	}
	b.refill(now)
	b.tokens -= n
	return b.wait(0)
}

// TryTake spends n tokens unless the bucket is in debt (reject mode, as
// Kafka's strict controller mutation quota: a request is refused only
// once the quota is already exceeded, so one larger than the burst is
// not refused forever). When refused, nothing is spent and the duration
// says when the debt is paid and a retry can pass.
func (b *TokenBucket) TryTake(now time.Time, n float64) (bool, time.Duration) {
	if ok, w := b.canTake(now); !ok {
		return false, w
	}
	b.tokens -= n
	return true, 0
}

// canTake reports whether TryTake would pass, spending nothing.
func (b *TokenBucket) canTake(now time.Time) (bool, time.Duration) {
	if b.unlimited() {
		return true, 0
	}
	b.refill(now)
	if b.tokens < 0 {
		return false, b.wait(0)
	}
	return true, 0
}

// Grant spends up to want whole tokens, as many as the bucket holds, and
// returns how many it spent (for record counts: a share fetch may acquire
// that many records). With nothing available it returns 0 and the time
// until one token is there.
func (b *TokenBucket) Grant(now time.Time, want int) (int, time.Duration) {
	if b.unlimited() {
		return want, 0
	}
	b.refill(now)
	n := int(math.Floor(max(b.tokens, 0)))
	if n > want {
		n = want
	}
	if n == 0 {
		return 0, b.wait(1)
	}
	b.tokens -= float64(n)
	return n, 0
}

// Refund gives back tokens taken by Grant but not used (fewer records
// were available than granted). Spending more than granted is recorded
// with Take.
func (b *TokenBucket) Refund(n float64) { b.tokens = min(b.burst, b.tokens+n) }

// IdleFull reports whether the bucket has refilled completely by now:
// dropping it and making a fresh one later changes nothing.
func (b *TokenBucket) IdleFull(now time.Time) bool {
	if b.unlimited() {
		return true
	}
	return b.tokens+now.Sub(b.last).Seconds()*b.rate >= b.burst
}
