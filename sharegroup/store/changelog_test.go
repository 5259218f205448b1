package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
)

// Tests of the change-log mode (Options.LogDir, changelog.go). A "crash"
// stops the log's background workers without a checkpoint and closes
// badger, leaving the segment files as a killed process would; reopening
// runs Open, which replays them.

// logEnv is a badger DB and a change-log Store over it that a test can
// crash and reopen on the same directories.
type logEnv struct {
	t      *testing.T
	dbDir  string
	logDir string
	opts   Options
	dbOpts func(dir string) badger.Options // nil: smallDB
	db     *badger.DB
	s      *Store
	held   bool // holdCheckpoints
}

// newLogEnv opens a change-log store with opts (LogDir set to a fresh
// directory; Prefix "sg/" and no compaction unless set), so LoadRecords
// returns every record written since the last snapshot.
func newLogEnv(t *testing.T, opts Options) *logEnv {
	return newLogEnvDB(t, opts, nil)
}

func newLogEnvDB(t *testing.T, opts Options, dbOpts func(string) badger.Options) *logEnv {
	t.Helper()
	dir := t.TempDir()
	e := &logEnv{t: t, dbDir: filepath.Join(dir, "db"), logDir: filepath.Join(dir, "log"), opts: opts, dbOpts: dbOpts}
	if e.opts.Prefix == nil {
		e.opts.Prefix = []byte("sg/")
	}
	if e.opts.SnapshotEvery == 0 {
		e.opts.SnapshotEvery = 1 << 30
	}
	if e.opts.LogSegmentBytes == 0 {
		e.opts.LogSegmentBytes = 64 << 10 // the default 8 MiB makes every Open slow
	}
	e.opts.LogDir = e.logDir
	t.Cleanup(func() { // before TempDir's cleanup (LIFO)
		if e.s != nil {
			if e.held { // the test failed while holding checkpoints
				e.s.log.ckpt.Unlock()
			}
			e.s.Close()
		}
		if e.db != nil {
			e.db.Close()
		}
	})
	e.reopen()
	return e
}

func (e *logEnv) openDB() *badger.DB {
	e.t.Helper()
	opts := smallDB
	if e.dbOpts != nil {
		opts = e.dbOpts
	}
	db, err := badger.Open(opts(e.dbDir))
	require.NoError(e.t, err)
	return db
}

// tryReopen opens badger (unless a failed Open left it open) and the
// Store, replaying the log.
func (e *logEnv) tryReopen() error {
	e.t.Helper()
	require.Nil(e.t, e.s, "reopen of a live store: crash or close it first")
	if e.db == nil {
		e.db = e.openDB()
	}
	s, err := Open(e.db, e.opts)
	e.s = s
	return err
}

func (e *logEnv) reopen() {
	e.t.Helper()
	require.NoError(e.t, e.tryReopen())
}

// holdCheckpoints keeps every checkpoint waiting (as a slow badger
// would) until the crash: every frame written from now on is replayed.
// Nothing may flush (Load, Keys, Delete) meanwhile.
func (e *logEnv) holdCheckpoints() {
	e.s.log.ckpt.Lock()
	e.held = true
}

// crash stops the store as a kill would: no checkpoint after this point,
// segment files left as they are (a spare too), badger closed (every
// transaction committed is durable: SyncWrites).
func (e *logEnv) crash() {
	e.t.Helper()
	l := e.s.log
	if !e.held {
		l.ckpt.Lock() // a checkpoint in progress ends first (its transactions are atomic anyway)
	}
	e.held = false
	l.mu.Lock()
	l.mu.closed = true // no write after this point
	l.mu.Unlock()
	close(l.stop)
	require.NoError(e.t, e.db.Close()) // a checkpoint woken now fails to read the watermark
	e.db = nil
	l.ckpt.Unlock()
	l.workers.Wait()
	l.mu.Lock()
	segs := append([]*segment{l.mu.cur, l.mu.spare}, l.mu.sealed...)
	l.mu.Unlock()
	for _, sg := range segs {
		if sg != nil {
			sg.f.Close()
		}
	}
	e.s = nil
}

func (e *logEnv) crashAndReopen() {
	e.t.Helper()
	e.crash()
	e.reopen()
}

// crashReopenRequire crashes, reopens, and requires the records of m and
// the state of parts.
func (e *logEnv) crashReopenRequire(m model, parts map[Key]*sharegroup.Partition) {
	e.t.Helper()
	e.crashAndReopen()
	e.requireRecords(m)
	e.requireState(parts)
}

// write writes batch as one Write (one frame, when nothing else is
// writing) and records it in m.
func (e *logEnv) write(m model, batch ...PartitionRecords) {
	e.t.Helper()
	require.NoError(e.t, e.s.Write(batch))
	m.add(batch...)
}

// segmentFiles lists the change-log segment files of dir, by name.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+segmentSuffix))
	require.NoError(t, err)
	slices.Sort(names)
	return names
}

// segmentCount counts the segment files of dir (-1 on error); safe
// outside the test's goroutine.
func segmentCount(dir string) int {
	names, err := filepath.Glob(filepath.Join(dir, "*"+segmentSuffix))
	if err != nil {
		return -1
	}
	return len(names)
}

// lastFrame returns the last intact frame in the log's segment files (in
// sequence order) and the path of its segment.
func lastFrame(t *testing.T, dir string) (string, frame) {
	t.Helper()
	paths, frames := allFrames(t, dir)
	require.NotEmpty(t, frames, "no frame in the log")
	return paths[len(paths)-1], frames[len(frames)-1]
}

// allFrames returns the intact frames of the log's segment files, in
// sequence order, each with the path of its segment.
func allFrames(t *testing.T, dir string) (paths []string, frames []frame) {
	t.Helper()
	for _, name := range segmentFiles(t, dir) {
		seq, err := parseSegSeq(name)
		require.NoError(t, err)
		raw, err := os.ReadFile(name)
		require.NoError(t, err)
		for _, f := range parseFrames(seq, raw) {
			paths, frames = append(paths, name), append(frames, f)
		}
	}
	return paths, frames
}

func parseSegSeq(path string) (uint64, error) {
	var seq uint64
	_, err := fmt.Sscanf(strings.TrimSuffix(filepath.Base(path), segmentSuffix), "%x", &seq)
	return seq, err
}

// writeAt overwrites bytes of the file at path.
func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// frameBytes encodes payload as a frame (appendFrame).
func frameBytes(payload []byte) []byte { return appendFrame(nil, payload) }

// model is, per key, what LoadRecords must return when the store never
// compacts (SnapshotEvery huge): the latest snapshot written and every
// delta after it, each exactly once and in order. A record replayed twice,
// lost or reordered shows as a difference. (A snapshot checkpointed in
// one transaction with deltas after it is folded with them, as a Write
// of both would be: tests checkpoint each snapshot before writing deltas,
// see create.)
type model map[Key][]sharegroup.Record

func (m model) add(batch ...PartitionRecords) {
	for _, pr := range batch {
		for _, r := range pr.Records {
			if r.Kind == sharegroup.KindSnapshot {
				m[pr.Key] = nil
			}
			m[pr.Key] = append(m[pr.Key], r)
		}
	}
}

func (m model) clone() model {
	c := make(model, len(m))
	for k, rs := range m {
		c[k] = slices.Clone(rs)
	}
	return c
}

// norm makes records comparable with decoded ones (no empty Batches).
func norm(rs []sharegroup.Record) []sharegroup.Record {
	out := make([]sharegroup.Record, len(rs))
	for i, r := range rs {
		if len(r.Batches) == 0 {
			r.Batches = nil
		}
		out[i] = r
	}
	return out
}

// sigs sums records up one line each, for short failure messages.
func sigs(rs []sharegroup.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%v spso=%d n=%d", r.Kind, r.StartOffset, len(r.Batches))
		if len(r.Batches) > 0 {
			out[i] += fmt.Sprintf(" %d..%d", r.Batches[0].First, r.Batches[len(r.Batches)-1].Last)
		}
	}
	return out
}

// requireSameRecords checks got is want, record for record.
func requireSameRecords(t *testing.T, want, got []sharegroup.Record, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, sigs(want), sigs(got), msgAndArgs...)
	require.True(t, reflect.DeepEqual(norm(want), norm(got)), msgAndArgs...)
}

// requireRecords checks that the store holds exactly m.
func (e *logEnv) requireRecords(m model) {
	e.t.Helper()
	for k, want := range m {
		got, err := e.s.LoadRecords(k)
		require.NoError(e.t, err)
		requireSameRecords(e.t, want, got, "key %v", k)
	}
}

// requireState checks that the store loads each live partition as it is.
func (e *logEnv) requireState(parts map[Key]*sharegroup.Partition) {
	e.t.Helper()
	for k, p := range parts {
		q, found, err := e.s.Load(k, sharegroup.DefaultConfig())
		require.NoError(e.t, err)
		require.True(e.t, found, "key %v", k)
		require.Equal(e.t, p.Snapshot(), q.Snapshot(), "key %v", k)
	}
}

// flush checkpoints every frame written so far (Keys flushes the log).
func (e *logEnv) flush() {
	e.t.Helper()
	_, err := e.s.Keys("")
	require.NoError(e.t, err)
}

// create writes new share-partitions for keys in one frame, checkpoints
// it (model) and returns them.
func (e *logEnv) create(m model, keys ...Key) map[Key]*sharegroup.Partition {
	e.t.Helper()
	parts := map[Key]*sharegroup.Partition{}
	var batch []PartitionRecords
	for _, k := range keys {
		p, pr := newPart(e.t, k)
		parts[k] = p
		batch = append(batch, pr)
	}
	e.write(m, batch...)
	e.flush()
	return parts
}

// createWide writes wide snapshots for keys in one frame and checkpoints
// it.
func (e *logEnv) createWide(m model, keys ...Key) {
	e.t.Helper()
	var batch []PartitionRecords
	for _, k := range keys {
		batch = append(batch, PartitionRecords{Key: k, Records: []sharegroup.Record{wideSnapshot()}})
	}
	e.write(m, batch...)
	e.flush()
}

// newPart creates a share-partition of epoch 1 at offset 0 and returns it
// with its initial snapshot to persist.
func newPart(t *testing.T, k Key) (*sharegroup.Partition, PartitionRecords) {
	t.Helper()
	p, eff, err := sharegroup.New(sharegroup.DefaultConfig(), 1, 0)
	require.NoError(t, err)
	return p, PartitionRecords{Key: k, Records: eff.Records}
}

// round has member m acquire [10r, 10r+9] of p and acknowledge it (accept,
// release or reject by r+salt) and returns the records to persist.
func round(p *sharegroup.Partition, r, salt int) ([]sharegroup.Record, error) {
	first := int64(r * 10)
	_, eff := p.Acquire(at(r), "m", []sharegroup.LogBatch{{First: first, Last: first + 9}}, 10, sharegroup.BatchOptimized)
	recs := eff.Records
	eff, err := p.Acknowledge(at(r), "m", []sharegroup.AckBatch{{First: first, Last: first + 9, Types: []sharegroup.AckType{sharegroup.AckType(1 + (r+salt)%3)}}})
	if err != nil {
		return nil, err
	}
	if len(recs)+len(eff.Records) == 0 {
		return nil, fmt.Errorf("round %d made no records", r)
	}
	return append(recs, eff.Records...), nil
}

func mustRound(t *testing.T, p *sharegroup.Partition, k Key, r, salt int) PartitionRecords {
	t.Helper()
	recs, err := round(p, r, salt)
	require.NoError(t, err)
	return PartitionRecords{Key: k, Records: recs}
}

// wideSnapshot is the snapshot of epoch 1 at offset 0 that wideDelta
// records follow.
func wideSnapshot() sharegroup.Record {
	return sharegroup.Record{Kind: sharegroup.KindSnapshot, StateEpoch: 1}
}

// wideDelta is a delta of epoch 1 acknowledging every other offset of
// [base, base+2n): n batches, about 4n bytes encoded. Deltas of disjoint
// ranges replay in any order, and the same one twice leaves the same
// state: only the stored records (model) tell.
func wideDelta(base int64, n int) sharegroup.Record {
	r := sharegroup.Record{Kind: sharegroup.KindDelta, StateEpoch: 1}
	for i := range n {
		o := base + int64(2*i)
		r.Batches = append(r.Batches, sharegroup.StateBatch{First: o, Last: o, State: sharegroup.StateAcknowledged, DeliveryCount: 1})
	}
	return r
}

// TestChangeLogCrashReplaysEverything guards the basic promise of the
// change log: every acknowledged Write is durable though nothing was
// checkpointed into badger. After a crash, Open replays all frames (one
// per Write, several keys each, one group name long enough that its keys
// start with the watermark key's bytes) exactly once and in order, and
// removes the replayed segments.
func TestChangeLogCrashReplaysEverything(t *testing.T) {
	t.Parallel()
	e := newLogEnv(t, Options{})
	keys := []Key{key, {Group: "g", Partition: 1}, {Group: "h", TopicID: [16]byte{9}, Partition: 3}, {Group: strings.Repeat("x", 255), Partition: 2}}
	m := model{}
	parts := e.create(m, keys...)
	created, err := e.s.readMark()
	require.NoError(t, err)
	var batch []PartitionRecords
	for r := range 30 {
		batch = batch[:0]
		for i, k := range keys {
			if (r+i)%3 != 0 { // not every key in every frame
				batch = append(batch, mustRound(t, parts[k], k, r, i))
			}
		}
		e.write(m, batch...)
	}
	mark, err := e.s.readMark()
	require.NoError(t, err)
	require.Equal(t, created, mark, "nothing checkpointed since create (CheckpointBytes 1 MiB)")
	// The segments holding frames: a spare prepared before the crash
	// holds none, and its number may be taken again by the segment the
	// reopened log starts (the crash can drop the spare's file).
	var before []string
	for _, name := range segmentFiles(t, e.logDir) {
		raw, err := os.ReadFile(name)
		require.NoError(t, err)
		if len(parseFrames(0, raw)) > 0 {
			before = append(before, name)
		}
	}
	require.NotEmpty(t, before)

	e.crashAndReopen()
	after := segmentFiles(t, e.logDir)
	for _, name := range before {
		require.NotContains(t, after, name, "a replayed segment was kept")
	}
	// Straight from badger, without the log: the replay is checkpointed.
	plain := New(e.db, e.opts)
	for k, want := range m {
		got, err := plain.LoadRecords(k)
		require.NoError(t, err)
		requireSameRecords(t, want, got, "key %v", k)
	}
	e.requireState(parts)
	got, err := e.s.Keys("g")
	require.NoError(t, err)
	require.Equal(t, []Key{{Group: "g", Partition: 1}, key}, got)

	// The reopened store goes on writing and replaying.
	for i, k := range keys {
		e.write(m, mustRound(t, parts[k], k, 30, i))
	}
	e.crashReopenRequire(m, parts)
}

// TestChangeLogCloseCheckpointsAndRemovesSegments: a clean Close moves
// everything into badger and leaves no segment file (nothing to replay);
// writes after Close fail; a store without the log reads the state.
func TestChangeLogCloseCheckpointsAndRemovesSegments(t *testing.T) {
	t.Parallel()
	e := newLogEnv(t, Options{})
	m := model{}
	p := e.create(m, key)[key]
	for r := range 10 {
		e.write(m, mustRound(t, p, key, r, 0))
	}
	require.NotEmpty(t, segmentFiles(t, e.logDir))
	s := e.s
	require.NoError(t, s.Close())
	require.Empty(t, segmentFiles(t, e.logDir))
	require.NoError(t, s.Close(), "a second Close does nothing")
	require.ErrorIs(t, s.Write([]PartitionRecords{{Key: Key{Group: "late"}, Records: []sharegroup.Record{wideSnapshot()}}}), errLogClosed)

	plain := New(e.db, e.opts) // badger alone holds it all
	got, err := plain.LoadRecords(key)
	require.NoError(t, err)
	requireSameRecords(t, m[key], got)

	e.s = nil
	require.NoError(t, e.db.Close())
	e.db = nil
	e.reopen()
	e.requireRecords(m)
	e.requireState(map[Key]*sharegroup.Partition{key: p})
}

// TestChangeLogTornTail: a crash in the middle of a frame write leaves a
// torn last frame; Open replays every frame before it and ignores it
// (whatever the damage), without an error, and the store goes on. A
// frame whose header was zeroed (a failed write unmade) is not replayed
// either, though its payload is intact; garbage after the last frame
// loses nothing.
func TestChangeLogTornTail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tear func(t *testing.T, path string, f frame)
		lost bool // the last frame is lost
	}{
		{"flipped payload byte", func(t *testing.T, path string, f frame) {
			mid := f.pos.off + frameHeaderBytes + int64(len(f.payload)/2)
			writeAt(t, path, mid, []byte{f.payload[len(f.payload)/2] ^ 0xff})
		}, true},
		{"payload not written", func(t *testing.T, path string, f frame) {
			writeAt(t, path, f.pos.off+frameHeaderBytes, make([]byte, len(f.payload)))
		}, true},
		{"file cut short", func(t *testing.T, path string, f frame) {
			require.NoError(t, os.Truncate(path, f.pos.off+frameHeaderBytes+int64(len(f.payload))/2))
		}, true},
		{"header cut short", func(t *testing.T, path string, f frame) {
			require.NoError(t, os.Truncate(path, f.pos.off+frameHeaderBytes/2))
		}, true},
		{"header zeroed", func(t *testing.T, path string, f frame) {
			writeAt(t, path, f.pos.off, make([]byte, frameHeaderBytes))
		}, true},
		{"bogus header after it", func(t *testing.T, path string, f frame) {
			bogus := binary.LittleEndian.AppendUint32(nil, 100)
			bogus = binary.LittleEndian.AppendUint32(bogus, 0xdeadbeef)
			writeAt(t, path, f.end, append(bogus, []byte(strings.Repeat("z", 100))...))
		}, false},
		{"huge length after it", func(t *testing.T, path string, f frame) {
			writeAt(t, path, f.end, []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newLogEnv(t, Options{})
			a, b := key, Key{Group: "g", Partition: 1}
			m := model{}
			parts := e.create(m, a, b)
			pa, pb := parts[a], parts[b]
			for r := range 8 {
				e.write(m, mustRound(t, pa, a, r, 0), mustRound(t, pb, b, r, 1))
			}
			before := m.clone()
			e.write(m, mustRound(t, pa, a, 8, 0), mustRound(t, pb, b, 8, 1))
			e.crash()
			path, f := lastFrame(t, e.logDir)
			tc.tear(t, path, f)
			e.reopen()
			want := m
			if tc.lost {
				want = before
			}
			e.requireRecords(want)

			// Writes go on after the torn frame, and replay.
			pa, _, err := e.s.Load(a, sharegroup.DefaultConfig())
			require.NoError(t, err)
			e.write(want, mustRound(t, pa, a, 20, 0))
			e.crashReopenRequire(want, map[Key]*sharegroup.Partition{a: pa})
		})
	}
}

// TestChangeLogReplayIdempotentAcrossWatermark: frames before the
// watermark are never applied again, whether checkpointed by a flush
// (Keys, LoadRecords) before the crash, by the replay of a previous Open
// whose segment removal did not survive (the old files are back), or by
// a second crash right after a reopen.
func TestChangeLogReplayIdempotentAcrossWatermark(t *testing.T) {
	t.Parallel()
	e := newLogEnv(t, Options{})
	keys := []Key{key, {Group: "g", Partition: 1}}
	m := model{}
	parts := e.create(m, keys...)
	rounds := func(from, to int) {
		for r := from; r < to; r++ {
			for i, k := range keys {
				e.write(m, mustRound(t, parts[k], k, r, i))
			}
		}
	}
	rounds(0, 5)
	_, err := e.s.Keys("g") // checkpoints all so far
	require.NoError(t, err)
	mark, err := e.s.readMark()
	require.NoError(t, err)
	require.NotEqual(t, logMark{}, mark)
	rounds(5, 10)
	e.crash()
	old := map[string][]byte{}
	for _, name := range segmentFiles(t, e.logDir) {
		raw, err := os.ReadFile(name)
		require.NoError(t, err)
		old[name] = raw
	}

	e.reopen() // replays rounds 5-9 only
	e.requireRecords(m)
	e.crash() // right after the replay, nothing written
	for name, raw := range old {
		require.NoError(t, os.WriteFile(name, raw, 0o644)) // the removal was not durable
	}
	e.reopen()
	e.requireRecords(m)
	e.requireState(parts)

	rounds(10, 12)
	e.crashAndReopen()
	e.crashReopenRequire(m, parts)
}

// smallDB is openDB's badger, with smaller memtables and caches: the
// tests open many at once.
func smallDB(dir string) badger.Options {
	return badger.DefaultOptions(dir).WithSyncWrites(true).WithLogger(nil).
		WithMemTableSize(8 << 20).WithBlockCacheSize(1 << 20).WithIndexCacheSize(1 << 20)
}

// smallTxnDB opens badger with transactions limited to about 157 KB
// (15% of a 1 MiB memtable), so a frame of a few hundred KB is too big
// for one checkpoint transaction.
func smallTxnDB(dir string) badger.Options {
	return badger.DefaultOptions(dir).WithSyncWrites(true).WithLogger(nil).
		WithMemTableSize(1 << 20).WithValueThreshold(64 << 10)
}

// wideFrame writes the wide snapshots of n keys, checkpoints them, then
// one frame of a 4 KB delta for each (about 4n KB), not checkpointed, and
// returns the keys.
func wideFrame(t *testing.T, e *logEnv, m model, n int) []Key {
	t.Helper()
	var keys []Key
	var deltas []PartitionRecords
	for i := range n {
		k := Key{Group: "g", Partition: int32(i)}
		keys = append(keys, k)
		deltas = append(deltas, PartitionRecords{Key: k, Records: []sharegroup.Record{wideDelta(int64(i)*4, 1000)}})
	}
	e.createWide(m, keys...)
	e.write(m, deltas...)
	return keys
}

// TestChangeLogFrameTooBigForOneTransaction: a frame too big for one
// badger transaction is checkpointed one share-partition per
// transaction (applyByKey), ending with the watermark after the whole
// frame; a crash after it replays nothing twice.
func TestChangeLogFrameTooBigForOneTransaction(t *testing.T) {
	t.Parallel()
	e := newLogEnvDB(t, Options{LogSegmentBytes: 1 << 20}, smallTxnDB)
	m := model{}
	wideFrame(t, e, m, 60)
	_, f := lastFrame(t, e.logDir)
	batch, err := decodeFrame(f.payload)
	require.NoError(t, err)
	require.Len(t, batch, 60)
	require.ErrorIs(t, New(e.db, e.opts).update(batch, nil), badger.ErrTxnTooBig, "precondition: the frame needs several transactions")

	e.requireRecords(m) // LoadRecords checkpoints it
	mark, err := e.s.readMark()
	require.NoError(t, err)
	require.Equal(t, logMark{pos: logPos{f.pos.seg, f.end}}, mark)
	e.crashAndReopen()
	e.requireRecords(m)
}

// TestChangeLogCheckpointInterruptedBetweenKeys: a crash in the middle of
// a per-key checkpoint of a big frame (the watermark counting the keys
// done, stored with each) leaves some of its share-partitions in badger;
// Open applies only the others, then the frame after it, so no delta is
// stored twice or lost.
func TestChangeLogCheckpointInterruptedBetweenKeys(t *testing.T) {
	t.Parallel()
	for _, done := range []int{1, 3, 59} {
		t.Run(fmt.Sprint(done), func(t *testing.T) {
			t.Parallel()
			e := newLogEnvDB(t, Options{LogSegmentBytes: 1 << 20}, smallTxnDB)
			m := model{}
			keys := wideFrame(t, e, m, 60)
			e.write(m, PartitionRecords{Key: keys[0], Records: []sharegroup.Record{wideDelta(100_000, 10)}},
				PartitionRecords{Key: keys[59], Records: []sharegroup.Record{wideDelta(100_000, 10)}})
			e.crash()

			// The checkpoint that was running: the first done keys
			// of the big frame, each with its watermark, as
			// applyByKey writes them.
			_, frames := allFrames(t, e.logDir)
			require.Len(t, frames, 3) // snapshots (checkpointed), big, small
			f, last := frames[1], frames[2]
			batch, err := decodeFrame(f.payload)
			require.NoError(t, err)
			db := e.openDB()
			s := New(db, e.opts)
			for i := range done {
				require.NoError(t, s.update(batch[i:i+1], logMark{pos: f.pos, keys: i + 1}.encode()))
			}
			require.NoError(t, db.Close())

			e.reopen()
			e.requireRecords(m)
			mark, err := e.s.readMark()
			require.NoError(t, err)
			require.Equal(t, logMark{pos: logPos{last.pos.seg, last.end}}, mark)
		})
	}
}

// TestChangeLogSegmentRotation: with small segments, many frames fill
// many segments; checkpoints (tiny CheckpointBytes) remove the sealed
// ones in the background, and a crash replays exactly what was not
// checkpointed.
func TestChangeLogSegmentRotation(t *testing.T) {
	t.Parallel()
	e := newLogEnv(t, Options{LogSegmentBytes: 2048, CheckpointBytes: 1024})
	keys := []Key{key, {Group: "g", Partition: 1}, {Group: "h", Partition: 2}}
	m := model{}
	parts := e.create(m, keys...)
	var seen []string
	for r := range 80 {
		for i, k := range keys {
			e.write(m, mustRound(t, parts[k], k, r, i))
		}
		seen = append(seen, segmentFiles(t, e.logDir)...)
	}
	slices.Sort(seen)
	require.Greater(t, len(slices.Compact(seen)), 5, "precondition: many segments")
	require.Eventually(t, func() bool { return segmentCount(e.logDir) <= 2 }, 5*time.Second, time.Millisecond,
		"sealed segments are removed once checkpointed (left: the current one and the spare)")
	for r := 80; r < 90; r++ {
		for i, k := range keys {
			e.write(m, mustRound(t, parts[k], k, r, i))
		}
	}
	e.crashReopenRequire(m, parts)
}

// TestChangeLogRotationKeepsLogOrder: every write of a frame bigger than
// half a segment rotates, often before the background has prepared the
// spare segment (the write then makes one itself). Segment sequence
// numbers must still follow the log order: Open replays segments in
// sequence order and skips those numbered below the watermark's, so a
// segment numbered below one written before it is replayed out of order
// (here: checkpoints lag, every frame is replayed), or, with checkpoints
// running, skipped though not checkpointed or applied twice.
func TestChangeLogRotationKeepsLogOrder(t *testing.T) {
	// Not parallel: the spare is late more often on an idle machine.
	e := newLogEnv(t, Options{LogSegmentBytes: 4096})
	m := model{}
	e.createWide(m, key)
	e.holdCheckpoints()
	var used []uint64 // the segment of each frame, in log order
	for i := range 100 {
		e.write(m, PartitionRecords{Key: key, Records: []sharegroup.Record{wideDelta(int64(i)*2000, 700)}}) // ~2.8 KB
		e.s.log.mu.Lock()
		used = append(used, e.s.log.mu.cur.seq)
		e.s.log.mu.Unlock()
	}
	if !slices.IsSorted(used) {
		t.Errorf("segments used out of sequence order: %v", used)
	}
	e.crashAndReopen()
	e.requireRecords(m)
}

// TestChangeLogRotationThenCrashLosesNothing: the same rotations with
// every frame checkpointed right after its write, until a write lands
// in a segment numbered below the previous one (the watermark's); a
// crash then must still replay that acknowledged frame. Open skips the
// segments numbered below the watermark's: the frame is lost.
func TestChangeLogRotationThenCrashLosesNothing(t *testing.T) {
	// Not parallel: the spare is late more often on an idle machine.
	e := newLogEnv(t, Options{LogSegmentBytes: 4096})
	m := model{}
	e.createWide(m, key)
	e.holdCheckpoints() // the test checkpoints, between writes
	var used []uint64
	for i := range 100 {
		e.write(m, PartitionRecords{Key: key, Records: []sharegroup.Record{wideDelta(int64(i)*2000, 700)}}) // ~2.8 KB
		e.s.log.mu.Lock()
		used = append(used, e.s.log.mu.cur.seq)
		e.s.log.mu.Unlock()
		if !slices.IsSorted(used) {
			break // crash with this frame not checkpointed
		}
		require.NoError(t, e.s.checkpointLocked())
	}
	t.Logf("segments used: %v", used)
	e.crashAndReopen()
	e.requireRecords(m)
}

// TestChangeLogFrameLargerThanSegment: a frame bigger than a whole
// segment still goes into one segment (grown past its prewritten size)
// and replays.
func TestChangeLogFrameLargerThanSegment(t *testing.T) {
	t.Parallel()
	e := newLogEnv(t, Options{LogSegmentBytes: 4096})
	m := model{}
	e.createWide(m, key)
	e.write(m, PartitionRecords{Key: key, Records: []sharegroup.Record{wideDelta(0, 3000)}}) // ~12 KB
	e.write(m, PartitionRecords{Key: key, Records: []sharegroup.Record{wideDelta(10_000, 10)}})
	e.crashAndReopen()
	e.requireRecords(m)
}

// TestChangeLogFailedWriteNotReplayed: a write failing before its frame
// (Options.BeforeCommit) fails its keys: later writes of them fail with
// ErrEarlierWriteFailed until LoadRecords, other keys write on, and after
// a crash neither the failed write nor those refused after it is
// replayed, while everything acknowledged is.
func TestChangeLogFailedWriteNotReplayed(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	e := newLogEnv(t, Options{BeforeCommit: func() error {
		if fail.Swap(false) {
			return errors.New("injected")
		}
		return nil
	}})
	a, b := key, Key{Group: "g", Partition: 1}
	m := model{}
	parts := e.create(m, a, b)
	pa, pb := parts[a], parts[b]
	e.write(m, mustRound(t, pa, a, 0, 0))

	fail.Store(true)
	require.ErrorContains(t, e.s.Write([]PartitionRecords{mustRound(t, pa, a, 1, 0)}), "injected")
	require.ErrorIs(t, e.s.Write([]PartitionRecords{mustRound(t, pa, a, 2, 0)}), ErrEarlierWriteFailed)
	e.write(m, mustRound(t, pb, b, 0, 1))
	e.crashAndReopen()
	e.requireRecords(m)

	// Without a crash: once its owner reloads it (LoadRecords), a writes
	// again.
	pa, _, err := e.s.Load(a, sharegroup.DefaultConfig())
	require.NoError(t, err)
	fail.Store(true)
	require.Error(t, e.s.Write([]PartitionRecords{mustRound(t, pa, a, 3, 0)}))
	require.ErrorIs(t, e.s.Write([]PartitionRecords{mustRound(t, pa, a, 4, 0)}), ErrEarlierWriteFailed)
	recs, err := e.s.LoadRecords(a)
	require.NoError(t, err)
	requireSameRecords(t, m[a], recs, "neither the failed nor the refused write is stored")
	pa, err = sharegroup.Recover(sharegroup.DefaultConfig(), recs)
	require.NoError(t, err)
	e.write(m, mustRound(t, pa, a, 5, 0))
	e.crashReopenRequire(m, map[Key]*sharegroup.Partition{a: pa})
}

// TestChangeLogBrokenLogFailsEveryWrite: when a frame write fails and
// its undoing (zeroing the frame) fails too, the log is broken: that
// write and every later one, of any share-partition, fail; what was
// acknowledged before survives a crash.
func TestChangeLogBrokenLogFailsEveryWrite(t *testing.T) {
	t.Parallel()
	e := newLogEnv(t, Options{})
	a, b := key, Key{Group: "g", Partition: 1}
	m := model{}
	parts := e.create(m, a, b)
	pa, pb := parts[a], parts[b]
	e.write(m, mustRound(t, pa, a, 0, 0), mustRound(t, pb, b, 0, 1))

	// The segment becomes unwritable: every pwrite fails (EBADF).
	l := e.s.log
	l.mu.Lock()
	rw := l.mu.cur.f
	ro, err := os.Open(rw.Name())
	require.NoError(t, err)
	l.mu.cur.f = ro
	l.mu.Unlock()
	defer rw.Close()

	require.Error(t, e.s.Write([]PartitionRecords{mustRound(t, pa, a, 1, 0)}))
	l.mu.Lock()
	require.Error(t, l.mu.broken)
	l.mu.Unlock()
	err = e.s.Write([]PartitionRecords{mustRound(t, pb, b, 1, 1)})
	require.ErrorContains(t, err, "unusable")
	_, prc := newPart(t, Key{Group: "c"})
	require.ErrorContains(t, e.s.Write([]PartitionRecords{prc}), "unusable", "a new share-partition too")
	e.crashAndReopen()
	e.requireRecords(m)
	recs, err := e.s.LoadRecords(Key{Group: "c"})
	require.NoError(t, err)
	require.Empty(t, recs)
}

// TestChangeLogDeleteThenCrash: a share-partition deleted (Delete,
// DeleteGroup) after writes through the log is not brought back by the
// replay after a crash, while the other keys' frames written after the
// delete replay; a new state written after the delete replays alone.
func TestChangeLogDeleteThenCrash(t *testing.T) {
	t.Parallel()
	e := newLogEnv(t, Options{})
	a, b, c := Key{Group: "g", Partition: 0}, Key{Group: "g", Partition: 1}, Key{Group: "h", Partition: 0}
	long := Key{Group: strings.Repeat("x", 255)} // its keys start with the watermark key
	m := model{}
	parts := e.create(m, a, b, c, long)
	for r := range 5 {
		for i, k := range []Key{a, b, c} {
			e.write(m, mustRound(t, parts[k], k, r, i))
		}
	}
	require.NoError(t, e.s.Delete(a))
	delete(m, a)
	delete(parts, a)
	for r := 5; r < 8; r++ {
		e.write(m, mustRound(t, parts[b], b, r, 1), mustRound(t, parts[c], c, r, 2))
	}
	e.crashAndReopen()
	recs, err := e.s.LoadRecords(a)
	require.NoError(t, err)
	require.Empty(t, recs, "a deleted share-partition was resurrected by the replay")
	e.requireRecords(m)
	e.requireState(parts)

	// A new a after the delete: only its own records.
	pa := e.create(m, a)[a]
	e.write(m, mustRound(t, pa, a, 0, 0), mustRound(t, parts[b], b, 8, 1))
	require.NoError(t, e.s.DeleteGroup("g"))
	delete(m, a)
	delete(m, b)
	e.write(m, mustRound(t, parts[c], c, 8, 2))
	e.crashAndReopen()
	got, err := e.s.Keys("g")
	require.NoError(t, err)
	require.Empty(t, got, "DeleteGroup's keys came back")
	e.requireRecords(m)
	e.requireState(map[Key]*sharegroup.Partition{c: parts[c]})

	// Deleting a group whose keys start with the watermark key's bytes
	// keeps the watermark: nothing before it is replayed again.
	e.write(m, mustRound(t, parts[c], c, 9, 2))
	require.NoError(t, e.s.DeleteGroup(long.Group))
	delete(m, long)
	e.write(m, mustRound(t, parts[c], c, 10, 2))
	e.crashAndReopen()
	recs, err = e.s.LoadRecords(long)
	require.NoError(t, err)
	require.Empty(t, recs)
	e.requireRecords(m)
}

// TestChangeLogCorruptFrameFailsOpen: a frame whose CRC matches but
// whose content does not decode is corruption, not a torn write: Open
// fails with an error wrapping sharegroup.ErrCorruptRecord (instead of
// silently dropping acknowledged writes), and applies nothing. Once the
// frame is gone, Open replays the rest.
func TestChangeLogCorruptFrameFailsOpen(t *testing.T) {
	t.Parallel()
	entry := func(recBytes []byte) []byte {
		b := []byte{frameVersion, 1, 'g'}
		b = append(b, make([]byte, 16+4)...)
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(recBytes)))
		return append(b, recBytes...)
	}
	good, err := (&sharegroup.Record{Kind: sharegroup.KindDelta, StateEpoch: 1}).AppendBinary(nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		payload []byte
	}{
		{"unknown version", append([]byte{2}, entry(good)[1:]...)},
		{"record checksum", func() []byte {
			b := entry(good)
			b[len(b)-1] ^= 1
			return b
		}()},
		{"record length past the end", func() []byte {
			b := entry(good)
			binary.LittleEndian.PutUint32(b[len(b)-len(good)-4:], 1000)
			return b
		}()},
		{"entry cut short", entry(good)[:10]},
		{"record count too big", func() []byte {
			b := entry(good)
			b[1+2+20] = 100
			return b
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newLogEnv(t, Options{})
			m := model{}
			p := e.create(m, key)[key]
			e.write(m, mustRound(t, p, key, 0, 0))
			e.crash()
			path, f := lastFrame(t, e.logDir)
			bad := frameBytes(tc.payload)
			writeAt(t, path, f.end, bad)

			err := e.tryReopen()
			require.ErrorIs(t, err, sharegroup.ErrCorruptRecord)
			require.Nil(t, e.s)
			got, err := New(e.db, e.opts).LoadRecords(key)
			require.NoError(t, err)
			requireSameRecords(t, m[key][:1], got, "Open applied frames before failing")

			writeAt(t, path, f.end, make([]byte, len(bad)))
			e.reopen()
			e.requireRecords(m)
			e.requireState(map[Key]*sharegroup.Partition{key: p})
		})
	}
}

// TestChangeLogConcurrentWritersAndCheckpoints: owners writing their
// own share-partitions at once (group commits of several keys per
// frame) while tiny CheckpointBytes keeps checkpoints running, each
// owner now and then reloading its key (a flush racing the background
// checkpoint); every owner always reads exactly its own records, and a
// crash replays them all.
func TestChangeLogConcurrentWritersAndCheckpoints(t *testing.T) {
	t.Parallel()
	var ckptErrs atomic.Int32
	e := newLogEnv(t, Options{LogSegmentBytes: 256 << 10, CheckpointBytes: 256, BackgroundError: func(error) { ckptErrs.Add(1) }})
	const owners, rounds = 6, 60
	models := make([]model, owners)
	parts := make(map[Key]*sharegroup.Partition, owners)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, owners)
	s := e.s
	for o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := Key{Group: fmt.Sprint("g", o%2), Partition: int32(o)}
			m := model{}
			models[o] = m
			p, eff, err := sharegroup.New(sharegroup.DefaultConfig(), 1, 0)
			if err != nil {
				errs <- err
				return
			}
			pr := PartitionRecords{Key: k, Records: eff.Records}
			if err := s.Write([]PartitionRecords{pr}); err != nil {
				errs <- err
				return
			}
			m.add(pr)
			if _, err := s.LoadRecords(k); err != nil { // checkpoints the snapshot (model)
				errs <- err
				return
			}
			for r := range rounds {
				recs, err := round(p, r, o)
				if err == nil {
					err = s.Write([]PartitionRecords{{Key: k, Records: recs}})
				}
				if err != nil {
					errs <- fmt.Errorf("owner %d round %d: %w", o, r, err)
					return
				}
				m.add(PartitionRecords{Key: k, Records: recs})
				if r%10 == 9 {
					got, err := s.LoadRecords(k)
					if err != nil {
						errs <- err
						return
					}
					if !reflect.DeepEqual(norm(m[k]), norm(got)) {
						errs <- fmt.Errorf("owner %d round %d: LoadRecords returned %d records, want %d", o, r, len(got), len(m[k]))
						return
					}
				}
			}
			mu.Lock()
			parts[k] = p
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Zero(t, ckptErrs.Load())
	e.crashAndReopen()
	for _, m := range models {
		e.requireRecords(m)
	}
	e.requireState(parts)
}

// TestChangeLogCheckpointsAfterReplay: after Open replayed frames, the
// background checkpoint still starts once CheckpointBytes of new frames
// have gathered (the replayed ones are already in badger and must not
// count, either way).
func TestChangeLogCheckpointsAfterReplay(t *testing.T) {
	t.Parallel()
	e := newLogEnv(t, Options{LogSegmentBytes: 128 << 10, CheckpointBytes: 16 << 10})
	m := model{}
	e.createWide(m, key)
	for i := range 3 { // ~12 KB: below CheckpointBytes
		e.write(m, PartitionRecords{Key: key, Records: []sharegroup.Record{wideDelta(int64(i)*3000, 1000)}})
	}
	e.crashAndReopen() // replays them

	for i := 3; i < 8; i++ { // ~20 KB of new frames: a checkpoint is due
		e.write(m, PartitionRecords{Key: key, Records: []sharegroup.Record{wideDelta(int64(i)*3000, 1000)}})
	}
	_, f := lastFrame(t, e.logDir)
	done := func() bool {
		mark, err := e.s.readMark()
		return err == nil && !mark.pos.less(logPos{f.pos.seg, f.end})
	}
	require.Eventually(t, done, 2*time.Second, time.Millisecond,
		"no background checkpoint after 20 KB of new frames (CheckpointBytes 16 KB)")
	e.crashAndReopen()
	e.requireRecords(m)
}
