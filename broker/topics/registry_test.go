package topics

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
)

// bareTopic builds a topic with n partitions that have no log: enough for
// the lookups, which never touch a partition's log.
func bareTopic(name string, id byte, n int, configs map[string]string) *Topic {
	t := &Topic{Name: name, ID: [16]byte{id}, configs: configs}
	for i := range n {
		t.partitions = append(t.partitions, &Partition{Topic: name, Index: int32(i)})
	}
	return t
}

// registryOf returns a registry holding ts, put in as Admin.Load does.
func registryOf(ts ...*Topic) *Registry {
	r := NewRegistry()
	for _, t := range ts {
		r.mu.byName[t.Name] = t
		r.mu.byID[t.ID] = t
	}
	return r
}

func TestRegistryGetAndGetID(t *testing.T) {
	t.Parallel()
	a := bareTopic("a", 1, 2, nil)
	b := bareTopic("b", 2, 1, nil)
	r := registryOf(a, b)

	require.Same(t, a, r.Get("a"))
	require.Same(t, b, r.Get("b"))
	require.Nil(t, r.Get("c"))
	require.Nil(t, r.Get(""))

	require.Same(t, a, r.GetID([16]byte{1}))
	require.Same(t, b, r.GetID([16]byte{2}))
	require.Nil(t, r.GetID([16]byte{3}))
	require.Nil(t, r.GetID([16]byte{}), "the zero id is no topic's")
}

func TestRegistryPartition(t *testing.T) {
	t.Parallel()
	a := bareTopic("a", 1, 3, nil)
	r := registryOf(a)

	for i := range int32(3) {
		p := r.Partition("a", i)
		require.NotNil(t, p)
		require.Same(t, a.partitions[i], p)
		require.Equal(t, "a", p.Topic)
		require.Equal(t, i, p.Index)
	}
	require.Nil(t, r.Partition("a", 3), "past the last partition")
	require.Nil(t, r.Partition("a", -1), "negative index")
	require.Nil(t, r.Partition("missing", 0), "unknown topic")
}

func TestRegistryPartitionOf(t *testing.T) {
	t.Parallel()
	a := bareTopic("a", 1, 2, nil)
	r := registryOf(a)

	require.Same(t, a.partitions[1], r.PartitionOf(a, 1))
	require.Nil(t, r.PartitionOf(a, 2))
	require.Nil(t, r.PartitionOf(a, -1))
	require.Nil(t, r.PartitionOf(nil, 0), "a nil topic has no partitions")
	// Looked up by name: a topic no longer in the registry has none.
	require.Nil(t, r.PartitionOf(bareTopic("gone", 9, 1, nil), 0))
}

func TestRegistryPartitionByID(t *testing.T) {
	t.Parallel()
	a := bareTopic("a", 1, 2, nil)
	r := registryOf(a)

	tp, p, code := r.PartitionByID([16]byte{1}, 1)
	require.Equal(t, int16(0), code)
	require.Same(t, a, tp)
	require.Same(t, a.partitions[1], p)

	tp, p, code = r.PartitionByID([16]byte{1}, 2)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, code)
	require.Same(t, a, tp, "the topic is known, the partition is not")
	require.Nil(t, p)

	tp, p, code = r.PartitionByID([16]byte{1}, -1)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, code)
	require.Same(t, a, tp)
	require.Nil(t, p)

	tp, p, code = r.PartitionByID([16]byte{7}, 0)
	require.Equal(t, kerr.UnknownTopicID.Code, code)
	require.Nil(t, tp)
	require.Nil(t, p)
}

func TestRegistryPartitionCount(t *testing.T) {
	t.Parallel()
	a := bareTopic("a", 1, 3, nil)
	z := bareTopic("z", 2, 0, nil)
	r := registryOf(a, z)
	require.Equal(t, int32(3), r.PartitionCount(a))
	require.Equal(t, int32(0), r.PartitionCount(z))
}

func TestRegistrySnapshotReturnsCopies(t *testing.T) {
	t.Parallel()
	a := bareTopic("a", 1, 2, map[string]string{"retention.ms": "1000"})
	r := registryOf(a)

	parts, configs := r.Snapshot(a)
	require.Len(t, parts, 2)
	require.Same(t, a.partitions[0], parts[0])
	require.Same(t, a.partitions[1], parts[1])
	require.Equal(t, map[string]string{"retention.ms": "1000"}, configs)

	configs["retention.ms"] = "5"
	configs["cleanup.policy"] = "compact"
	delete(configs, "retention.ms")
	parts[0] = nil
	_ = append(parts[:1], &Partition{Topic: "a", Index: 99})

	require.Equal(t, "1000", r.Override(a, "retention.ms"), "the topic's configs are not the returned map")
	require.Equal(t, "", r.Override(a, "cleanup.policy"))
	require.Equal(t, int32(2), r.PartitionCount(a))
	require.NotNil(t, r.Partition("a", 0), "the topic's partitions are not the returned slice")
	require.Equal(t, int32(1), r.Partition("a", 1).Index)

	parts2, configs2 := r.Snapshot(a)
	require.Equal(t, map[string]string{"retention.ms": "1000"}, configs2)
	require.Same(t, a.partitions[0], parts2[0])
	require.Same(t, a.partitions[1], parts2[1])
}

func TestRegistrySnapshotOfTopicWithoutConfigs(t *testing.T) {
	t.Parallel()
	a := bareTopic("a", 1, 1, nil)
	r := registryOf(a)
	parts, configs := r.Snapshot(a)
	require.Len(t, parts, 1)
	require.NotNil(t, configs, "a writable empty map even when the topic has none")
	require.Empty(t, configs)
	configs["x"] = "y"
	require.Equal(t, "", r.Override(a, "x"))
}

func TestRegistryOverride(t *testing.T) {
	t.Parallel()
	a := bareTopic("a", 1, 1, map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"})
	b := bareTopic("b", 2, 1, nil)
	r := registryOf(a, b)
	require.Equal(t, "1000", r.Override(a, "retention.ms"))
	require.Equal(t, "compact", r.Override(a, "cleanup.policy"))
	require.Equal(t, "", r.Override(a, "segment.ms"), "no override, no broker default behind it")
	require.Equal(t, "", r.Override(b, "retention.ms"), "nil configs")
}

func TestRegistryAll(t *testing.T) {
	t.Parallel()
	require.Empty(t, NewRegistry().All())

	a := bareTopic("a", 1, 1, nil)
	b := bareTopic("b", 2, 1, nil)
	c := bareTopic("c", 3, 1, nil)
	r := registryOf(a, b, c)
	all := r.All()
	require.Len(t, all, 3)
	require.ElementsMatch(t, []*Topic{a, b, c}, all)

	all[0] = nil // the caller's slice
	require.ElementsMatch(t, []*Topic{a, b, c}, r.All())
}

func TestValidName(t *testing.T) {
	t.Parallel()
	valid := []string{
		"a",
		"A",
		"0",
		"orders",
		"Orders.v2",
		"my_topic-1",
		"...",
		"a..b",
		".hidden",
		"_",
		"-",
		strings.Repeat("x", 249),
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
	}
	for _, name := range valid {
		require.NoError(t, ValidName(name), "%q", name)
	}
	invalid := []string{
		"",
		".",
		"..",
		strings.Repeat("x", 250),
		strings.Repeat("x", 1000),
		"has space",
		"slash/topic",
		`back\slash`,
		"colon:topic",
		"star*",
		"plus+",
		"comma,",
		"tab\t",
		"newline\n",
		"nul\x00",
		"héllo",  // non-ASCII letter
		"topic😀", // non-BMP
		"\xff",   // invalid UTF-8
	}
	for _, name := range invalid {
		err := ValidName(name)
		require.Error(t, err, "%q", name)
		require.True(t, errors.Is(err, kafkaerr.ErrInvalidTopic), "%q: %v", name, err)
		require.Equal(t, kerr.InvalidTopicException.Code, kafkaerr.Code(err), "%q", name)
	}
}

func TestValidNameLengthIsInBytes(t *testing.T) {
	t.Parallel()
	// 249 is a byte count (Kafka counts chars, but only ASCII is allowed,
	// so the two agree for every name that passes the character check).
	require.NoError(t, ValidName(strings.Repeat("a", 248)+"."))
	require.ErrorIs(t, ValidName(strings.Repeat("a", 249)+"."), kafkaerr.ErrInvalidTopic)
}

func TestPartitionWatchNotify(t *testing.T) {
	t.Parallel()
	var p Partition
	p.Notify() // no waiters: nothing to do, must not panic

	watched := make(chan struct{}, 1)
	unwatched := make(chan struct{}, 1)
	p.Watch(watched)
	p.Notify()
	select {
	case <-watched:
	default:
		t.Fatal("a watched channel is signalled")
	}
	select {
	case <-unwatched:
		t.Fatal("a channel never watched is not signalled")
	default:
	}

	// Still watched after a signal (the caller must unwatch).
	p.Notify()
	select {
	case <-watched:
	default:
		t.Fatal("a watcher stays registered until unwatched")
	}

	p.Unwatch(watched)
	p.Notify()
	select {
	case <-watched:
		t.Fatal("an unwatched channel is not signalled")
	default:
	}
	p.Unwatch(watched)   // twice: harmless
	p.Unwatch(unwatched) // never watched: harmless
}

func TestPartitionNotifyDoesNotBlock(t *testing.T) {
	t.Parallel()
	var p Partition
	full := make(chan struct{}, 1)
	full <- struct{}{}
	unbuffered := make(chan struct{}) // nobody receives
	p.Watch(full)
	p.Watch(unbuffered)
	// Would deadlock (and the test time out) if the send blocked.
	p.Notify()
	p.Notify()
	require.Len(t, full, 1, "a full channel stays at its one signal")

	// Several watchers are all signalled.
	var chs []chan struct{}
	for range 5 {
		ch := make(chan struct{}, 1)
		chs = append(chs, ch)
		p.Watch(ch)
	}
	p.Notify()
	for i, ch := range chs {
		select {
		case <-ch:
		default:
			t.Fatalf("watcher %d not signalled", i)
		}
	}
}
