package topics

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
	slog "github.com/shoal-mq/shoal/log"
)

func TestCreatePersistsAndOpensPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("orders", 3, map[string]string{"retention.ms": "60000"})

	require.Equal(t, "orders", tp.Name)
	require.NotEqual(t, [16]byte{}, tp.ID, "a real topic id is never the zero id")
	require.Same(t, tp, e.reg.Get("orders"))
	require.Same(t, tp, e.reg.GetID(tp.ID))
	require.Equal(t, int32(3), e.reg.PartitionCount(tp))
	require.Equal(t, "60000", e.reg.Override(tp, "retention.ms"))
	for i := range int32(3) {
		p := e.reg.Partition("orders", i)
		require.NotNil(t, p)
		require.Equal(t, "orders", p.Topic)
		require.Equal(t, i, p.Index)
		require.NotNil(t, p.Log)
		require.NotNil(t, p.M, "the topic's metric children")
		require.Equal(t, int64(60000), p.Log.Config().RetentionMs, "the overrides reach the log config")
		requireDirExists(t, e.partDir("orders", int(i)))
	}
	require.Nil(t, e.reg.Partition("orders", 3))

	recs := e.storedTopics()
	require.Equal(t, map[string]record{
		"orders": {Name: "orders", ID: tp.ID, Partitions: 3, Configs: map[string]string{"retention.ms": "60000"}},
	}, recs)
}

func TestCreateNilConfigs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("plain", 1, nil)
	_, configs := e.reg.Snapshot(tp)
	require.Empty(t, configs)
	require.Equal(t, slog.DefaultConfig(), e.reg.Partition("plain", 0).Log.Config())
}

func TestCreateDistinctIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create("a", 1, nil)
	b := e.create("b", 1, nil)
	require.NotEqual(t, a.ID, b.ID)
	require.ElementsMatch(t, []*Topic{a, b}, e.reg.All())
}

func TestCreateExistingName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.create("dup", 2, map[string]string{"retention.ms": "1000"})

	tp, err := e.admin.Create("dup", 5, nil, false)
	require.ErrorIs(t, err, kafkaerr.ErrTopicExists)
	require.Nil(t, tp)
	_, err = e.admin.Create("dup", 5, nil, true)
	require.ErrorIs(t, err, kafkaerr.ErrTopicExists, "validateOnly checks the name too")

	require.Same(t, first, e.reg.Get("dup"), "the first topic is untouched")
	require.Equal(t, int32(2), e.reg.PartitionCount(first))
	require.Equal(t, "1000", e.reg.Override(first, "retention.ms"))
	require.Equal(t, int32(2), e.storedTopics()["dup"].Partitions)
	require.Equal(t, first.ID, e.storedTopics()["dup"].ID)
}

func TestCreateValidateOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp, err := e.admin.Create("dry", 4, map[string]string{"retention.ms": "5"}, true)
	require.NoError(t, err)
	require.NotNil(t, tp)
	require.Equal(t, "dry", tp.Name)

	require.Nil(t, e.reg.Get("dry"))
	require.Empty(t, e.reg.All())
	require.Empty(t, e.storedTopics())
	requireNoDir(t, e.partDir("dry", 0))

	e.restart()
	require.Nil(t, e.reg.Get("dry"), "nothing was persisted")

	// The name is still free.
	e.create("dry", 1, nil)
}

func TestCreateInvalidName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, name := range []string{"", ".", "..", "a/b", "sp ace"} {
		for _, validateOnly := range []bool{false, true} {
			tp, err := e.admin.Create(name, 1, nil, validateOnly)
			require.ErrorIs(t, err, kafkaerr.ErrInvalidTopic, "%q", name)
			require.Nil(t, tp)
		}
	}
	require.Empty(t, e.reg.All())
	require.Empty(t, e.storedTopics())
	entries, err := os.ReadDir(e.logsDir())
	if !os.IsNotExist(err) {
		require.NoError(t, err)
		require.Empty(t, entries, "no log directory made")
	}
}

// A directory left under the name of a new topic's partition (by a
// deleted topic of the same name) is not adopted: the new partition
// starts empty.
func TestCreateDoesNotAdoptLeftoverDirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := e.partDir("reuse", 0)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	junk := filepath.Join(dir, "leftover")
	require.NoError(t, os.WriteFile(junk, []byte("old"), 0o644))

	e.create("reuse", 1, nil)
	_, err := os.Stat(junk)
	require.True(t, os.IsNotExist(err), "the old directory's content is gone: %v", err)
	require.Equal(t, int64(0), e.reg.Partition("reuse", 0).Log.LogEndOffset())
}

func TestLoadRestoresTopics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create("alpha", 3, map[string]string{"retention.ms": "123000", "max.message.bytes": "2048"})
	b := e.create("beta", 1, nil)
	leo := appendOne(t, e.reg.Partition("alpha", 2), time.Now())
	_, err := e.reg.Partition("alpha", 2).Log.Sync()
	require.NoError(t, err)
	aID, bID := a.ID, b.ID

	e.restart()

	require.Len(t, e.reg.All(), 2)
	a2 := e.reg.Get("alpha")
	require.NotNil(t, a2)
	require.NotSame(t, a, a2, "a new registry")
	require.Equal(t, aID, a2.ID)
	require.Same(t, a2, e.reg.GetID(aID))
	require.Equal(t, int32(3), e.reg.PartitionCount(a2))
	_, configs := e.reg.Snapshot(a2)
	require.Equal(t, map[string]string{"retention.ms": "123000", "max.message.bytes": "2048"}, configs)
	for i := range int32(3) {
		p := e.reg.Partition("alpha", i)
		require.NotNil(t, p)
		require.Equal(t, "alpha", p.Topic)
		require.Equal(t, i, p.Index)
		require.NotNil(t, p.M)
		require.Equal(t, int64(123000), p.Log.Config().RetentionMs)
		require.Equal(t, int32(2048), p.Log.Config().MaxMessageBytes)
	}
	require.Equal(t, leo, e.reg.Partition("alpha", 2).Log.LogEndOffset(), "the log's data is recovered")
	require.Equal(t, int64(0), e.reg.Partition("alpha", 0).Log.LogEndOffset())

	b2 := e.reg.Get("beta")
	require.NotNil(t, b2)
	require.Equal(t, bID, b2.ID)
	require.Equal(t, int32(1), e.reg.PartitionCount(b2))
	_, configs = e.reg.Snapshot(b2)
	require.NotNil(t, configs)
	require.Empty(t, configs)
	// A topic stored without configs gets a writable map (UpdateConfigs
	// and Snapshot rely on it).
	require.NotNil(t, b2.configs)
}

func TestLoadRemovesStrayLogDirectories(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("kept", 2, nil)
	e.close()

	stray := []string{
		e.partDir("gone", 0),   // a topic that no longer exists
		e.partDir("kept", 2),   // a partition the topic does not have
		e.partDir("kept-1", 0), // a name that only looks like one of kept's
	}
	for _, d := range stray {
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "00000000000000000000.log"), nil, 0o644))
	}
	hidden := filepath.Join(e.logsDir(), ".trash")
	require.NoError(t, os.MkdirAll(hidden, 0o755))
	file := filepath.Join(e.logsDir(), "not-a-dir-0")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))

	e.open()

	for _, d := range stray {
		requireNoDir(t, d)
	}
	requireDirExists(t, e.partDir("kept", 0))
	requireDirExists(t, e.partDir("kept", 1))
	requireDirExists(t, hidden) // dot-directories are left alone
	_, err := os.Stat(file)
	require.NoError(t, err, "only directories are removed")
	require.Equal(t, int32(2), e.reg.PartitionCount(e.reg.Get("kept")))
}

func TestLoadEmptyStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // loads an empty store, with no logs directory at all
	require.Empty(t, e.reg.All())
	requireNoDir(t, e.logsDir())
	require.Empty(t, e.pending())
}

func TestAddPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("grow", 2, map[string]string{"retention.ms": "7000"})
	p0, p1 := e.reg.Partition("grow", 0), e.reg.Partition("grow", 1)

	require.NoError(t, e.admin.AddPartitions(tp, 5, false))
	require.Equal(t, int32(5), e.reg.PartitionCount(tp))
	require.Same(t, p0, e.reg.Partition("grow", 0), "existing partitions are kept")
	require.Same(t, p1, e.reg.Partition("grow", 1))
	for i := range int32(5) {
		p := e.reg.Partition("grow", i)
		require.NotNil(t, p)
		require.Equal(t, i, p.Index)
		require.Equal(t, "grow", p.Topic)
		require.Equal(t, int64(7000), p.Log.Config().RetentionMs, "new partitions get the topic's configs")
		requireDirExists(t, e.partDir("grow", int(i)))
	}
	require.Nil(t, e.reg.Partition("grow", 5))
	rec := e.storedTopics()["grow"]
	require.Equal(t, int32(5), rec.Partitions)
	require.Equal(t, map[string]string{"retention.ms": "7000"}, rec.Configs, "the configs are kept in the record")

	e.restart()
	tp = e.reg.Get("grow")
	require.Equal(t, int32(5), e.reg.PartitionCount(tp))
	require.Equal(t, "7000", e.reg.Override(tp, "retention.ms"))
}

func TestAddPartitionsNotMore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("fixed", 3, nil)
	for _, count := range []int32{3, 2, 0, -1} {
		for _, validateOnly := range []bool{false, true} {
			err := e.admin.AddPartitions(tp, count, validateOnly)
			require.ErrorIs(t, err, kafkaerr.ErrInvalidPartitions, "count %d", count)
		}
	}
	require.Equal(t, int32(3), e.reg.PartitionCount(tp))
	require.Equal(t, int32(3), e.storedTopics()["fixed"].Partitions)
}

func TestAddPartitionsValidateOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("dry", 1, nil)
	require.NoError(t, e.admin.AddPartitions(tp, 4, true))
	require.Equal(t, int32(1), e.reg.PartitionCount(tp))
	require.Nil(t, e.reg.Partition("dry", 1))
	require.Equal(t, int32(1), e.storedTopics()["dry"].Partitions)
	requireNoDir(t, e.partDir("dry", 1))

	e.restart()
	require.Equal(t, int32(1), e.reg.PartitionCount(e.reg.Get("dry")))
}

func TestAddPartitionsDeletedTopic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.create("gone", 1, nil)
	require.NoError(t, e.admin.Delete(old))
	require.ErrorIs(t, e.admin.AddPartitions(old, 3, false), kafkaerr.ErrUnknownTopic)

	// Nor a stale topic whose name was created again.
	cur := e.create("gone", 1, nil)
	require.ErrorIs(t, e.admin.AddPartitions(old, 3, false), kafkaerr.ErrUnknownTopic)
	require.Equal(t, int32(1), e.reg.PartitionCount(cur))
}

func TestUpdateConfigs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("conf", 2, map[string]string{"retention.ms": "1000"})

	var seen map[string]string
	err := e.admin.UpdateConfigs(tp, false, func(cur map[string]string) (map[string]string, error) {
		seen = cur
		next := map[string]string{}
		for k, v := range cur {
			next[k] = v
		}
		next["retention.ms"] = "2000"
		next["max.message.bytes"] = "4096"
		return next, nil
	})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"retention.ms": "1000"}, seen, "update gets the current overrides")
	require.Equal(t, "2000", e.reg.Override(tp, "retention.ms"))
	require.Equal(t, "4096", e.reg.Override(tp, "max.message.bytes"))
	for i := range int32(2) {
		c := e.reg.Partition("conf", i).Log.Config()
		require.Equal(t, int64(2000), c.RetentionMs, "applied to every partition log")
		require.Equal(t, int32(4096), c.MaxMessageBytes)
	}
	require.Equal(t, map[string]string{"retention.ms": "2000", "max.message.bytes": "4096"}, e.storedTopics()["conf"].Configs)
	require.Equal(t, int32(2), e.storedTopics()["conf"].Partitions)

	// Replacing, not merging: an override left out is removed.
	require.NoError(t, e.admin.UpdateConfigs(tp, false, func(map[string]string) (map[string]string, error) {
		return map[string]string{"max.message.bytes": "8192"}, nil
	}))
	require.Equal(t, "", e.reg.Override(tp, "retention.ms"))
	require.Equal(t, int64(slog.DefaultRetentionMs), e.reg.Partition("conf", 0).Log.Config().RetentionMs)

	e.restart()
	tp = e.reg.Get("conf")
	_, configs := e.reg.Snapshot(tp)
	require.Equal(t, map[string]string{"max.message.bytes": "8192"}, configs, "persisted")
	require.Equal(t, int32(8192), e.reg.Partition("conf", 1).Log.Config().MaxMessageBytes)
}

func TestUpdateConfigsGetsPrivateCopy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("conf", 1, map[string]string{"retention.ms": "1000"})
	injected := errors.New("invalid config")
	err := e.admin.UpdateConfigs(tp, false, func(cur map[string]string) (map[string]string, error) {
		cur["retention.ms"] = "1" // scribbling on the copy
		cur["extra"] = "x"
		return nil, injected
	})
	require.ErrorIs(t, err, injected)
	_, configs := e.reg.Snapshot(tp)
	require.Equal(t, map[string]string{"retention.ms": "1000"}, configs)
	require.Equal(t, int64(1000), e.reg.Partition("conf", 0).Log.Config().RetentionMs)
	require.Equal(t, map[string]string{"retention.ms": "1000"}, e.storedTopics()["conf"].Configs)
}

func TestUpdateConfigsValidateOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("conf", 1, map[string]string{"retention.ms": "1000"})
	called := 0
	err := e.admin.UpdateConfigs(tp, true, func(cur map[string]string) (map[string]string, error) {
		called++
		return map[string]string{"retention.ms": "9"}, nil
	})
	require.NoError(t, err)
	require.Equal(t, 1, called, "validateOnly still validates")
	require.Equal(t, "1000", e.reg.Override(tp, "retention.ms"))
	require.Equal(t, int64(1000), e.reg.Partition("conf", 0).Log.Config().RetentionMs)
	require.Equal(t, map[string]string{"retention.ms": "1000"}, e.storedTopics()["conf"].Configs)

	// A validation failure is reported under validateOnly too.
	injected := errors.New("bad value")
	err = e.admin.UpdateConfigs(tp, true, func(map[string]string) (map[string]string, error) {
		return nil, injected
	})
	require.ErrorIs(t, err, injected)

	e.restart()
	require.Equal(t, "1000", e.reg.Override(e.reg.Get("conf"), "retention.ms"))
}

func TestUpdateConfigsDeletedTopic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.create("gone", 1, nil)
	require.NoError(t, e.admin.Delete(old))
	update := func(map[string]string) (map[string]string, error) {
		t.Error("update must not run for a deleted topic")
		return map[string]string{"retention.ms": "1"}, nil
	}
	err := e.admin.UpdateConfigs(old, false, update)
	require.ErrorIs(t, err, kafkaerr.ErrUnknownTopic)
	require.Empty(t, e.storedTopics(), "not written back")

	// A stale topic whose name was created again is not the new one.
	cur := e.create("gone", 1, nil)
	require.ErrorIs(t, e.admin.UpdateConfigs(old, false, update), kafkaerr.ErrUnknownTopic)
	require.Equal(t, "", e.reg.Override(cur, "retention.ms"))
	require.Empty(t, e.storedTopics()["gone"].Configs)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("gone", 2, nil)
	other := e.create("other", 1, nil)
	p0 := e.reg.Partition("gone", 0)
	woken := make(chan struct{}, 1)
	p0.Watch(woken)

	require.NoError(t, e.admin.Delete(tp))

	require.Equal(t, []string{
		"forget " + idHex(tp.ID),
		"dropOffsets gone",
		"dropShareState " + idHex(tp.ID),
	}, e.hooks.take(), "each once, in this order")
	require.Nil(t, e.reg.Get("gone"))
	require.Nil(t, e.reg.GetID(tp.ID))
	require.Nil(t, e.reg.Partition("gone", 0))
	require.ElementsMatch(t, []*Topic{other}, e.reg.All())
	require.Empty(t, e.pending())
	_, ok := e.storedTopics()["gone"]
	require.False(t, ok, "the record is gone")
	requireNoDir(t, e.partDir("gone", 0))
	requireNoDir(t, e.partDir("gone", 1))
	requireDirExists(t, e.partDir("other", 0))
	select {
	case <-woken:
	default:
		t.Fatal("waiters of a deleted partition are woken")
	}

	// Deleting it again is refused and calls nothing.
	require.ErrorIs(t, e.admin.Delete(tp), kafkaerr.ErrUnknownTopic)
	require.Empty(t, e.hooks.take())

	e.restart()
	require.Nil(t, e.reg.Get("gone"))
	require.NotNil(t, e.reg.Get("other"))
	require.Empty(t, e.pending())
}

func TestDeleteStaleTopic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.create("name", 1, nil)
	require.NoError(t, e.admin.Delete(old))
	e.hooks.take()
	cur := e.create("name", 1, nil)
	require.ErrorIs(t, e.admin.Delete(old), kafkaerr.ErrUnknownTopic, "the old topic, not the new one of its name")
	require.Same(t, cur, e.reg.Get("name"))
	require.Empty(t, e.hooks.take())
}

func TestDeleteFailedCleanupStaysPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("gone", 1, nil)
	injected := errors.New("injected clean-up failure")
	e.hooks.setCleanupErr(injected)

	err := e.admin.Delete(tp)
	require.ErrorIs(t, err, injected)
	require.Nil(t, e.reg.Get("gone"), "the topic itself is deleted")
	require.Nil(t, e.reg.GetID(tp.ID))
	_, ok := e.storedTopics()["gone"]
	require.False(t, ok)
	requireNoDir(t, e.partDir("gone", 0))
	require.Equal(t, []string{"gone"}, e.pending())
	require.Equal(t, []string{"forget " + idHex(tp.ID)}, e.hooks.take(), "the logs are gone, the clean-up is not done")

	// The name stays taken while the clean-up fails.
	_, err = e.admin.Create("gone", 1, nil, false)
	require.ErrorIs(t, err, injected)
	require.Nil(t, e.reg.Get("gone"))
	require.Empty(t, e.storedTopics())
	require.Equal(t, []string{"gone"}, e.pending())
	require.Empty(t, e.hooks.take())

	// Once it stops failing, creating the name finishes it first.
	e.hooks.setCleanupErr(nil)
	tp2 := e.create("gone", 1, nil)
	require.NotEqual(t, tp.ID, tp2.ID)
	require.Equal(t, []string{
		"dropOffsets gone",
		"dropShareState " + idHex(tp.ID),
	}, e.hooks.take(), "the old topic's offsets and share state, by its id")
	require.Empty(t, e.pending())
	require.Same(t, tp2, e.reg.Get("gone"))
}

func TestDeleteFailedDropOffsetsStaysPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("gone", 1, nil)
	injected := errors.New("injected offsets failure")
	e.hooks.setDropOffsetsErr(injected)

	require.ErrorIs(t, e.admin.Delete(tp), injected)
	require.Equal(t, []string{
		"forget " + idHex(tp.ID),
		"dropOffsets gone",
		"dropShareState " + idHex(tp.ID),
	}, e.hooks.take(), "the share state is dropped even when the offsets fail")
	require.Equal(t, []string{"gone"}, e.pending())

	e.hooks.setDropOffsetsErr(nil)
	require.NoError(t, e.admin.FinishDeletions("gone"))
	require.Equal(t, []string{"dropOffsets gone", "dropShareState " + idHex(tp.ID)}, e.hooks.take())
	require.Empty(t, e.pending())
}

func TestFinishDeletionsAtRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.create("a", 1, nil)
	b := e.create("b", 1, nil)
	e.create("kept", 1, nil)
	injected := errors.New("injected clean-up failure")
	e.hooks.setCleanupErr(injected)
	require.ErrorIs(t, e.admin.Delete(a), injected)
	require.ErrorIs(t, e.admin.Delete(b), injected)
	require.ElementsMatch(t, []string{"a", "b"}, e.pending())
	e.hooks.take()
	e.hooks.setCleanupErr(nil)

	e.restart()
	require.ElementsMatch(t, []string{"a", "b"}, e.pending(), "pending survives a restart")
	require.Nil(t, e.reg.Get("a"))
	require.Nil(t, e.reg.Get("b"))
	require.Empty(t, e.hooks.take(), "Load alone finishes nothing")

	// A name filter finishes only that name's.
	require.NoError(t, e.admin.FinishDeletions("b"))
	require.Equal(t, []string{"dropOffsets b", "dropShareState " + idHex(b.ID)}, e.hooks.take())
	require.Equal(t, []string{"a"}, e.pending())
	require.NoError(t, e.admin.FinishDeletions("nothing-pending"))
	require.Empty(t, e.hooks.take())

	// "" finishes every one left, as the broker's start-up does.
	require.NoError(t, e.admin.FinishDeletions(""))
	require.Equal(t, []string{"dropOffsets a", "dropShareState " + idHex(a.ID)}, e.hooks.take())
	require.Empty(t, e.pending())
	require.NotNil(t, e.reg.Get("kept"))

	require.NoError(t, e.admin.FinishDeletions(""))
	require.Empty(t, e.hooks.take(), "nothing left to do")
}

func TestFinishDeletionsStillFailing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := e.create("gone", 1, nil)
	injected := errors.New("injected clean-up failure")
	e.hooks.setCleanupErr(injected)
	require.ErrorIs(t, e.admin.Delete(tp), injected)
	e.restart()
	require.ErrorIs(t, e.admin.FinishDeletions(""), injected)
	require.Equal(t, []string{"gone"}, e.pending())
}

func TestExclusiveHoldsAdminLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	injected := errors.New("from fn")
	ran := false
	err := e.admin.Exclusive(func() error {
		ran = true
		require.False(t, e.admin.mu.TryLock(), "the Admin's lock is held while fn runs")
		return injected
	})
	require.True(t, ran)
	require.ErrorIs(t, err, injected)
	require.True(t, e.admin.mu.TryLock(), "and released after")
	e.admin.mu.Unlock()
}

// TestCreateDoesNotAdoptLeftoverDirectoryOnInjectedFS: Create removes a
// deleted topic's leftover partition directory on Options.FS, the file
// system the logs live on (it used os.RemoveAll, so with log.MemFS, which
// the broker's fault tests inject, a re-created topic adopted the deleted
// topic's data; production's log.OSFS was never affected).
func TestCreateDoesNotAdoptLeftoverDirectoryOnInjectedFS(t *testing.T) {
	t.Parallel()
	fs := slog.NewMemFS()
	e := newEnvFS(t, fs)
	old := e.create("reuse", 1, nil)
	appendOne(t, e.reg.Partition("reuse", 0), time.Now())
	_, err := e.reg.Partition("reuse", 0).Log.Sync()
	require.NoError(t, err)

	// The log deletion fails, as a storage error would: the topic is
	// deleted, its directory stays.
	dir := e.partDir("reuse", 0)
	injected := errors.New("injected remove failure")
	fs.SetErrorHook(func(op slog.Op, name string) error {
		if op == slog.OpRemoveAll && name == dir {
			return injected
		}
		return nil
	})
	require.ErrorIs(t, e.admin.Delete(old), injected)
	fs.SetErrorHook(nil)
	require.Nil(t, e.reg.Get("reuse"))

	e.create("reuse", 1, nil)
	require.Equal(t, int64(0), e.reg.Partition("reuse", 0).Log.LogEndOffset(),
		"a new topic starts empty, not with the deleted topic's records")
}
