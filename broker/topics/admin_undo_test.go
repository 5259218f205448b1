package topics

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	slog "github.com/shoal-mq/shoal/log"
)

// failMkdir makes creating the directory dir fail on fs.
func failMkdir(fs *slog.MemFS, dir string, err error) {
	fs.SetErrorHook(func(op slog.Op, name string) error {
		if op == slog.OpMkdirAll && name == dir {
			return err
		}
		return nil
	})
}

// TestCreateUndoneWhenAPartitionFailsToOpen: a Create whose second
// partition cannot be opened fails and leaves nothing: no topic in the
// registry, no record that would bring it back at the next start, and
// the name can be created once the storage works again.
func TestCreateUndoneWhenAPartitionFailsToOpen(t *testing.T) {
	t.Parallel()
	fs := slog.NewMemFS()
	e := newEnvFS(t, fs)
	injected := errors.New("injected mkdir failure")
	failMkdir(fs, e.partDir("half", 1), injected)
	_, err := e.admin.Create("half", 3, map[string]string{"retention.ms": "1000"}, false)
	require.ErrorIs(t, err, injected)
	fs.SetErrorHook(nil)
	require.Nil(t, e.reg.Get("half"))
	require.NotContains(t, e.storedTopics(), "half", "the record of the failed creation is removed")

	e.restart()
	require.Nil(t, e.reg.Get("half"), "a failed creation does not come back at the next start")
	tp := e.create("half", 3, nil)
	require.Equal(t, int32(3), e.reg.PartitionCount(tp))
	require.Empty(t, e.reg.Override(tp, "retention.ms"), "the new topic has its own configs")
}

// TestAddPartitionsUndoneWhenAPartitionFailsToOpen: a growth whose
// second new partition cannot be opened fails and leaves the topic as
// it was, in memory and in its record (so the next start opens what the
// topic had).
func TestAddPartitionsUndoneWhenAPartitionFailsToOpen(t *testing.T) {
	t.Parallel()
	fs := slog.NewMemFS()
	e := newEnvFS(t, fs)
	tp := e.create("grow", 2, nil)
	injected := errors.New("injected mkdir failure")
	failMkdir(fs, e.partDir("grow", 3), injected)
	require.ErrorIs(t, e.admin.AddPartitions(tp, 5, false), injected)
	fs.SetErrorHook(nil)
	require.Equal(t, int32(2), e.reg.PartitionCount(tp))
	require.Equal(t, int32(2), e.storedTopics()["grow"].Partitions, "the record is back at 2 partitions")

	e.restart()
	tp = e.reg.Get("grow")
	require.NotNil(t, tp)
	require.Equal(t, int32(2), e.reg.PartitionCount(tp))
	require.NoError(t, e.admin.AddPartitions(tp, 5, false))
	require.Equal(t, int32(5), e.reg.PartitionCount(tp))
}

// TestCreateCopiesConfigs: the topic keeps its own copy of the configs
// it was created with; the caller's map changing later changes nothing.
func TestCreateCopiesConfigs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := map[string]string{"retention.ms": "1000"}
	tp := e.create("own", 1, cfg)
	cfg["retention.ms"] = "2000"
	require.Equal(t, "1000", e.reg.Override(tp, "retention.ms"))
}
