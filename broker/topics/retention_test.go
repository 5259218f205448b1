package topics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestEnforceRetentionAndCloseEmptyRegistry(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	core, logs := observer.New(zapcore.DebugLevel)
	r.EnforceRetention(time.Now(), zap.New(core))
	require.Zero(t, logs.Len(), "nothing to do, nothing logged")
	require.NoError(t, r.Close())
}

func TestEnforceRetentionNothingExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("a", 2, nil)
	e.create("b", 1, map[string]string{"retention.ms": "-1"})
	now := time.Now()
	appendOne(t, e.reg.Partition("a", 0), now)
	appendOne(t, e.reg.Partition("b", 0), now)
	woken := make(chan struct{}, 1)
	e.reg.Partition("a", 0).Watch(woken)

	core, logs := observer.New(zapcore.DebugLevel)
	e.reg.EnforceRetention(now.Add(time.Minute), zap.New(core))
	require.Zero(t, logs.Len(), "no failure, nothing deleted: %v", logs.All())
	select {
	case <-woken:
		t.Fatal("no waiter is woken when the log start does not move")
	default:
	}
	require.Equal(t, int64(0), e.reg.Partition("a", 0).Log.LogStartOffset())
}

func TestEnforceRetentionDeletesAndWakes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("short", 1, map[string]string{"retention.ms": "1000"})
	e.create("forever", 1, map[string]string{"retention.ms": "-1"})
	now := time.Now()
	short, forever := e.reg.Partition("short", 0), e.reg.Partition("forever", 0)
	leo := appendOne(t, short, now)
	appendOne(t, forever, now)
	wokeShort := make(chan struct{}, 1)
	wokeForever := make(chan struct{}, 1)
	short.Watch(wokeShort)
	forever.Watch(wokeForever)

	core, logs := observer.New(zapcore.DebugLevel)
	e.reg.EnforceRetention(now.Add(time.Hour), zap.New(core))

	require.Equal(t, leo, short.Log.LogStartOffset(), "the expired records are gone")
	require.Equal(t, int64(0), forever.Log.LogStartOffset())
	select {
	case <-wokeShort:
	default:
		t.Fatal("the waiters of a partition whose log start moved are woken")
	}
	select {
	case <-wokeForever:
		t.Fatal("the other partition's waiters are not")
	default:
	}
	require.Zero(t, logs.FilterMessage("retention failed").Len())
	require.Equal(t, 1, logs.FilterMessage("retention deleted segments").Len())
}

func TestRegistryClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("a", 2, nil)
	e.create("b", 1, nil)
	appendOne(t, e.reg.Partition("a", 1), time.Now())
	require.NoError(t, e.reg.Close())
	require.NoError(t, e.reg.Close(), "closing twice is harmless")

	// A closed registry's retention reports each partition's failure and
	// carries on (it must not panic or stop at the first).
	core, logs := observer.New(zapcore.DebugLevel)
	e.reg.EnforceRetention(time.Now(), zap.New(core))
	require.Equal(t, 3, logs.FilterMessage("retention failed").Len())
}
