package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	// 100 tokens/s, burst 50: the burst is free, then debt is throttled.
	b := NewTokenBucket(100, 50, t0)
	require.Zero(t, b.Take(t0, 50))
	require.Equal(t, 200*time.Millisecond, b.Take(t0, 20))
	require.Zero(t, b.Take(at(200), 0), "the debt is paid after its throttle time")
	require.Equal(t, 100*time.Millisecond, b.Take(at(200), 10))
	// Idle refills to the burst, never beyond.
	require.Zero(t, b.Take(at(10_000), 50))
	require.Equal(t, 10*time.Millisecond, b.Take(at(10_000), 1))

	// Reject mode: refused, without spending, only while in debt.
	r := NewTokenBucket(10, 0, t0) // burst: one second = 10
	ok, _ := r.TryTake(t0, 8)
	require.True(t, ok)
	ok, _ = r.TryTake(t0, 5)
	require.True(t, ok, "not in debt yet")
	ok, wait := r.TryTake(t0, 1)
	require.False(t, ok)
	require.Equal(t, 300*time.Millisecond, wait)
	ok, _ = r.TryTake(at(300), 30)
	require.True(t, ok, "larger than the burst, from a bucket out of debt")
	ok, wait = r.TryTake(at(300), 1)
	require.False(t, ok)
	require.Equal(t, 3*time.Second, wait)

	// Grant hands out whole tokens; Refund returns unused ones.
	g := NewTokenBucket(5, 5, t0)
	n, _ := g.Grant(t0, 3)
	require.Equal(t, 3, n)
	n, _ = g.Grant(t0, 3)
	require.Equal(t, 2, n)
	n, wait = g.Grant(t0, 3)
	require.Zero(t, n)
	require.Equal(t, 200*time.Millisecond, wait)
	g.Refund(2)
	n, _ = g.Grant(t0, 3)
	require.Equal(t, 2, n)

	// Unlimited, and a changed limit applies at once.
	u := NewTokenBucket(0, 0, t0)
	require.Zero(t, u.Take(t0, 1e12))
	u.SetLimit(10, 0)
	require.Equal(t, time.Second, u.Take(t0, 10))
}
