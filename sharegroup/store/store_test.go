package store

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func openDB(t testing.TB, dir string) *badger.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithSyncWrites(true).WithLogger(nil))
	require.NoError(t, err)
	return db
}

var key = Key{Group: "g", TopicID: [16]byte{1, 2, 3}, Partition: 7}

func write(t *testing.T, s *Store, k Key, eff sharegroup.Effects) {
	t.Helper()
	require.NoError(t, s.Write([]PartitionRecords{{Key: k, Records: eff.Records}}))
}

// KIP-932 §5: "an acked record is never redelivered after restart"; "after
// a crash an in-flight record reloads AVAILABLE with its last persisted count".
func TestAcksSurviveReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := openDB(t, dir)
	s := New(db, Options{Prefix: []byte("sg/")})
	cfg := sharegroup.DefaultConfig()

	p, eff, err := sharegroup.New(cfg, 1, 100)
	require.NoError(t, err)
	write(t, s, key, eff)
	_, eff = p.Acquire(at(0), "a", []sharegroup.LogBatch{{First: 100, Last: 199}}, 500, sharegroup.BatchOptimized)
	write(t, s, key, eff)
	eff, err = p.Acknowledge(at(1), "a", []sharegroup.AckBatch{
		{First: 100, Last: 149, Types: []sharegroup.AckType{sharegroup.AckAccept}},
		{First: 160, Last: 169, Types: []sharegroup.AckType{sharegroup.AckRelease}},
		{First: 170, Last: 179, Types: []sharegroup.AckType{sharegroup.AckReject}},
	})
	require.NoError(t, err)
	write(t, s, key, eff)
	want := p.Snapshot()
	require.NoError(t, db.Close())

	db = openDB(t, dir)
	defer db.Close()
	s = New(db, Options{Prefix: []byte("sg/")})
	q, found, err := s.Load(key, cfg)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, want, q.Snapshot())
	require.Equal(t, int64(150), q.SPSO())
	got, _ := q.Acquire(at(2), "b", []sharegroup.LogBatch{{First: 150, Last: 199}, {First: 200, Last: 209}}, 500, sharegroup.BatchOptimized)
	require.Equal(t, []sharegroup.Acquired{
		{First: 150, Last: 159, DeliveryCount: 1}, // in flight at the crash: back, same count
		{First: 160, Last: 169, DeliveryCount: 2}, // released: redelivered
		{First: 180, Last: 209, DeliveryCount: 1}, // 170-179 rejected: never again
	}, got)

	_, found, err = s.Load(Key{Group: "other"}, cfg)
	require.NoError(t, err)
	require.False(t, found)
}

func countKeys(t *testing.T, db *badger.DB, prefix []byte) (n int) {
	t.Helper()
	require.NoError(t, db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			n++
		}
		return nil
	}))
	return n
}

// A random share-consumer workload through the store with a small snapshot
// interval; the DB is reopened now and then and must always load the
// persisted view of the live partition (snapshot + deltas replay).
func TestRandomWorkloadWithCompactionAndReopen(t *testing.T) {
	t.Parallel()
	for seed := range 10 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), 99))
			dir := t.TempDir()
			db := openDB(t, dir)
			opts := Options{Prefix: []byte("sg/"), SnapshotEvery: 1 + rng.IntN(8)}
			s := New(db, opts)
			cfg := sharegroup.DefaultConfig()
			cfg.DeliveryCountLimit = 3
			cfg.RecordLockDuration = 5 * time.Second
			keys := []Key{key, {Group: "g", Partition: 1}, {Group: "g2", Partition: 1}}
			parts := make([]*sharegroup.Partition, len(keys))
			var batch []PartitionRecords
			for i, k := range keys {
				p, eff, err := sharegroup.New(cfg, 0, 0)
				require.NoError(t, err)
				parts[i] = p
				batch = append(batch, PartitionRecords{Key: k, Records: eff.Records})
			}
			require.NoError(t, s.Write(batch))
			now := t0
			for step := range 300 {
				now = now.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
				batch = batch[:0]
				for i, p := range parts { // group commit: every partition acts, one Write
					member := fmt.Sprint("m", rng.IntN(3))
					var eff sharegroup.Effects
					switch rng.IntN(4) {
					case 0:
						off := p.NextFetchOffset()
						_, eff = p.Acquire(now, member, []sharegroup.LogBatch{{First: off, Last: off + rng.Int64N(10)}}, 5, sharegroup.BatchOptimized)
					case 1, 2:
						var acks []sharegroup.AckBatch
						for _, r := range p.Ranges() {
							if r.Member == member && r.State == sharegroup.StateAcquired && r.Deadline.After(now) {
								acks = append(acks, sharegroup.AckBatch{First: r.First, Last: r.Last, Types: []sharegroup.AckType{sharegroup.AckType(rng.IntN(4))}})
							}
						}
						var err error
						eff, err = p.Acknowledge(now, member, acks)
						require.NoError(t, err)
					case 3:
						eff = p.ExpireLocks(now.Add(3 * time.Second))
					}
					batch = append(batch, PartitionRecords{Key: keys[i], Records: eff.Records})
				}
				require.NoError(t, s.Write(batch))
				if rng.IntN(40) == 0 || step == 299 {
					require.NoError(t, db.Close())
					db = openDB(t, dir)
					s = New(db, opts)
				}
				for i, k := range keys {
					q, found, err := s.Load(k, cfg)
					require.NoError(t, err)
					require.True(t, found)
					require.Equal(t, parts[i].Snapshot(), q.Snapshot(), "step %d key %v", step, k)
					require.Less(t, countKeys(t, db, s.deltaPrefix(k)), opts.SnapshotEvery)
				}
			}
			require.NoError(t, db.Close())
		})
	}
}

func TestResetReplacesDeltas(t *testing.T) {
	t.Parallel()
	db := openDB(t, t.TempDir())
	defer db.Close()
	s := New(db, Options{Prefix: []byte("sg/")})
	p, eff, err := sharegroup.New(sharegroup.DefaultConfig(), 1, 0)
	require.NoError(t, err)
	write(t, s, key, eff)
	p.Acquire(at(0), "a", []sharegroup.LogBatch{{First: 0, Last: 9}}, 10, sharegroup.BatchOptimized)
	eff, err = p.Acknowledge(at(1), "a", []sharegroup.AckBatch{{First: 3, Last: 4, Types: []sharegroup.AckType{sharegroup.AckAccept}}})
	require.NoError(t, err)
	write(t, s, key, eff)
	require.Equal(t, 1, countKeys(t, db, s.deltaPrefix(key)))
	write(t, s, key, p.Reset(2, 500))
	require.Equal(t, 0, countKeys(t, db, s.deltaPrefix(key)))
	recs, err := s.LoadRecords(key)
	require.NoError(t, err)
	require.Equal(t, []sharegroup.Record{{Kind: sharegroup.KindSnapshot, StateEpoch: 2, StartOffset: 500}}, recs)
}

func TestDeleteAndKeys(t *testing.T) {
	t.Parallel()
	db := openDB(t, t.TempDir())
	defer db.Close()
	s := New(db, Options{Prefix: []byte("sg/")})
	other := New(db, Options{Prefix: []byte("xx/")})
	keys := []Key{{Group: "a", Partition: 0}, {Group: "a", TopicID: [16]byte{9}, Partition: 2}, {Group: "ab", Partition: 0}, {Group: "b", Partition: 3}}
	var batch []PartitionRecords
	for _, k := range keys {
		p, eff, err := sharegroup.New(sharegroup.DefaultConfig(), 0, 0)
		require.NoError(t, err)
		p.Acquire(at(0), "m", []sharegroup.LogBatch{{First: 0, Last: 9}}, 10, sharegroup.BatchOptimized)
		ack, err := p.Acknowledge(at(1), "m", []sharegroup.AckBatch{{First: 5, Last: 5, Types: []sharegroup.AckType{sharegroup.AckAccept}}})
		require.NoError(t, err)
		batch = append(batch, PartitionRecords{Key: k, Records: append(eff.Records, ack.Records...)})
	}
	require.NoError(t, s.Write(batch))
	require.NoError(t, other.Write(batch[:1]))
	got, err := s.Keys("a")
	require.NoError(t, err)
	require.Equal(t, keys[:2], got, `"ab" is not part of group "a"`)

	require.NoError(t, s.Delete(keys[0]))
	_, found, err := s.Load(keys[0], sharegroup.DefaultConfig())
	require.NoError(t, err)
	require.False(t, found)
	require.NoError(t, s.DeleteGroup("a"))
	got, err = s.Keys("a")
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = s.Keys("ab")
	require.NoError(t, err)
	require.Equal(t, keys[2:3], got)
	// The other prefix is untouched.
	_, found, err = other.Load(keys[0], sharegroup.DefaultConfig())
	require.NoError(t, err)
	require.True(t, found)
	// Writing again after a delete starts cleanly.
	p, eff, err := sharegroup.New(sharegroup.DefaultConfig(), 3, 42)
	require.NoError(t, err)
	write(t, s, keys[0], eff)
	q, found, err := s.Load(keys[0], sharegroup.DefaultConfig())
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, p.Snapshot(), q.Snapshot())
}

// flipBit corrupts the value stored at key (one bit in its middle).
func flipBit(t *testing.T, db *badger.DB, key []byte) {
	t.Helper()
	require.NoError(t, db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		v[len(v)/2] ^= 1
		return txn.Set(key, v)
	}))
}

func TestCorruptionIsReported(t *testing.T) {
	t.Parallel()
	db := openDB(t, t.TempDir())
	defer db.Close()
	s := New(db, Options{Prefix: []byte("sg/")})
	p, eff, err := sharegroup.New(sharegroup.DefaultConfig(), 0, 0)
	require.NoError(t, err)
	write(t, s, key, eff)
	p.Acquire(at(0), "a", []sharegroup.LogBatch{{First: 0, Last: 9}}, 10, sharegroup.BatchOptimized)
	eff, err = p.Acknowledge(at(1), "a", []sharegroup.AckBatch{{First: 5, Last: 5, Types: []sharegroup.AckType{sharegroup.AckAccept}}})
	require.NoError(t, err)
	write(t, s, key, eff)
	flipBit(t, db, s.deltaKey(key, 0))
	_, _, err = s.Load(key, sharegroup.DefaultConfig())
	require.ErrorIs(t, err, sharegroup.ErrCorruptRecord)
	// Deltas without a snapshot are corruption too.
	require.NoError(t, db.Update(func(txn *badger.Txn) error { return txn.Delete(s.snapshotKey(key)) }))
	_, _, err = s.Load(key, sharegroup.DefaultConfig())
	require.ErrorIs(t, err, sharegroup.ErrCorruptRecord)
}

// TestConcurrentWritesGroupCommit: many owners writing at once (their
// Writes share transactions) each find exactly their own state after a
// reopen; a batch that cannot be prepared (its fold hits a corrupt
// delta) fails alone, without failing the Writes committed with it.
func TestConcurrentWritesGroupCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := openDB(t, dir)
	s := New(db, Options{Prefix: []byte("sg/"), SnapshotEvery: 7})
	cfg := sharegroup.DefaultConfig()
	const owners, rounds = 16, 40
	want := make([]sharegroup.Record, owners)
	errs := make(chan error, owners)
	for o := range owners {
		go func() {
			k := Key{Group: "g", Partition: int32(o)}
			p, eff, err := sharegroup.New(cfg, 1, 0)
			if err == nil {
				err = s.Write([]PartitionRecords{{Key: k, Records: eff.Records}})
			}
			for r := 0; r < rounds && err == nil; r++ {
				first := int64(r * 10)
				_, eff = p.Acquire(at(r), "m", []sharegroup.LogBatch{{First: first, Last: first + 9}}, 10, sharegroup.BatchOptimized)
				if err = s.Write([]PartitionRecords{{Key: k, Records: eff.Records}}); err != nil {
					break
				}
				eff, err = p.Acknowledge(at(r), "m", []sharegroup.AckBatch{{First: first, Last: first + 9, Types: []sharegroup.AckType{sharegroup.AckType(1 + (r+o)%3)}}})
				if err == nil {
					err = s.Write([]PartitionRecords{{Key: k, Records: eff.Records}})
				}
			}
			want[o] = p.Snapshot()
			errs <- err
		}()
	}
	for range owners {
		require.NoError(t, <-errs)
	}
	require.NoError(t, db.Close())
	db = openDB(t, dir)
	defer db.Close()
	s = New(db, Options{Prefix: []byte("sg/"), SnapshotEvery: 7})
	for o := range owners {
		q, found, err := s.Load(Key{Group: "g", Partition: int32(o)}, cfg)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, want[o], q.Snapshot(), "owner %d", o)
	}

	// A corrupt delta makes the next fold of that key fail before the
	// commit; queued with a healthy Write, only it fails.
	bad, good := Key{Group: "g", Partition: 0}, Key{Group: "g", Partition: 1}
	deltas := func(k Key) seqRange {
		txn := db.NewTransaction(false)
		defer txn.Discard()
		r, err := s.deltaRange(txn, k)
		require.NoError(t, err)
		return r
	}
	rng := deltas(bad)
	for i := int64(0); rng.count() < 6; i++ { // the next Write of bad folds (SnapshotEvery 7)
		require.Less(t, i, int64(20))
		pb, _, err := s.Load(bad, cfg)
		require.NoError(t, err)
		off := 400 + i
		pb.Acquire(at(100), "m", []sharegroup.LogBatch{{First: off, Last: off}}, 1, sharegroup.BatchOptimized)
		eff, err := pb.Acknowledge(at(100), "m", []sharegroup.AckBatch{{First: off, Last: off, Types: []sharegroup.AckType{sharegroup.AckAccept}}})
		require.NoError(t, err)
		require.NotEmpty(t, eff.Records)
		require.NoError(t, s.Write([]PartitionRecords{{Key: bad, Records: eff.Records}}))
		rng = deltas(bad)
	}
	flipBit(t, db, s.deltaKey(bad, rng.first))
	pb, _, err := s.Load(good, cfg)
	require.NoError(t, err)
	_, effGood := pb.Acquire(at(200), "m", []sharegroup.LogBatch{{First: 400, Last: 409}}, 10, sharegroup.BatchOptimized)
	got := s.commitGroup([]*Pending{
		{batch: []PartitionRecords{{Key: bad, Records: effGood.Records}}},
		{batch: []PartitionRecords{{Key: good, Records: effGood.Records}}},
	})
	require.ErrorIs(t, got[0], sharegroup.ErrCorruptRecord)
	require.NoError(t, got[1])
	_, _, err = s.Load(bad, cfg)
	require.ErrorIs(t, err, sharegroup.ErrCorruptRecord)
	q, _, err := s.Load(good, cfg)
	require.NoError(t, err)
	require.Equal(t, pb.Snapshot(), q.Snapshot())
}
