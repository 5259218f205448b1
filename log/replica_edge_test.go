package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/protocol"
)

// edgeLog is a replica log with its batches in a model.
type edgeLog struct {
	t    *testing.T
	fsys *MemFS
	cfg  Config
	p    *Partition
	m    *replicaModel
}

func newEdgeLog(t *testing.T, cfg Config) *edgeLog {
	e := &edgeLog{t: t, fsys: NewMemFS(), cfg: cfg, m: newReplicaModel()}
	e.p = openMem(t, e.fsys, cfg)
	return e
}

// add appends batch b (offsets from the LEO) and records it.
func (e *edgeLog) add(b []byte) {
	e.t.Helper()
	b = appendRep(e.t, e.p, b)
	mb := newMBatch(e.t, b)
	e.m.batches = append(e.m.batches, mb)
	e.m.cur.apply(&mb)
}

// fill appends n batches cycling through producers: plain, idempotent
// (producer 1) and transactional (producer 2, a commit or abort marker
// every third batch), of about size bytes each.
func (e *edgeLog) fill(n, size int) {
	e.t.Helper()
	for range n {
		i := len(e.m.batches)
		switch i % 3 {
		case 0:
			e.add(testBatch(1+i%3, size/(1+i%3), -1, 0, 0))
		case 1:
			st, ok := e.m.cur.producers[1]
			seq := int32(0)
			if ok {
				seq = st.lastSeq + 1
			}
			e.add(testBatch(1, size, 1, 0, seq))
		default:
			st, ok := e.m.cur.producers[2]
			if ok && st.txnStart >= 0 && i%2 == 0 {
				b, err := e.p.PrepareMarker(Marker{ProducerID: 2, ProducerEpoch: st.epoch, CoordinatorEpoch: 1, Commit: i%4 == 0}, testNow)
				require.NoError(e.t, err)
				e.add(b)
				continue
			}
			seq := int32(0)
			if ok {
				seq = st.lastSeq + 1
			}
			e.add(makeBatch(batchSpec{n: 1, valueSize: size, pid: 2, seq: seq, attrs: protocol.AttrTransactional}))
		}
	}
}

// reopen closes the log cleanly and opens it again.
func (e *edgeLog) reopen() {
	e.t.Helper()
	require.NoError(e.t, e.p.Close())
	e.p = openMem(e.t, e.fsys, e.cfg)
	e.m.hw = e.p.LogStartOffset()
}

// crash syncs, crashes and opens what survived.
func (e *edgeLog) crash() {
	e.t.Helper()
	_, err := e.p.Sync()
	require.NoError(e.t, err)
	e.fsys = e.fsys.CrashClone()
	abandon(e.p)
	e.p = openMem(e.t, e.fsys, e.cfg)
}

// truncate cuts the log and the model at ord.
func (e *edgeLog) truncate(ord int64) {
	e.t.Helper()
	require.NoError(e.t, e.p.TruncateFrom(ord))
	e.m.truncate(ord)
	e.m.cur = e.m.replay(newMState(), 1, ord)
}

// check compares the partition with the model: ordinals, offsets, bytes
// and producer state (no retention: the whole history is on disk).
func (e *edgeLog) check(what string) {
	e.t.Helper()
	t, p, m := e.t, e.p, e.m
	require.Equal(t, m.first, p.FirstOrdinal(), what)
	require.Equal(t, m.next(), p.NextOrdinal(), what)
	require.Equal(t, m.leo(), p.LogEndOffset(), what)
	for ord := m.first; ord <= m.next(); ord++ {
		off, err := p.OrdinalOffset(ord)
		require.NoError(t, err, "%s: OrdinalOffset(%d)", what, ord)
		require.Equal(t, m.offsetOf(ord), off, "%s: OrdinalOffset(%d)", what, ord)
	}
	got, n, err := p.ReadOrdinals(nil, m.first, m.next(), math.MaxInt64)
	require.NoError(t, err, what)
	require.Equal(t, int(m.next()-m.first), n, what)
	require.True(t, bytes.Equal(m.bytesOf(m.first, m.next()), got), "%s: bytes", what)
	// After a deletion the state may still hold what the deleted
	// segments said (kept in memory and snapshots) or not (rebuilt from
	// the first segment).
	want := m.replay(newMState(), 1, m.next())
	if m.first > 1 && !slices.Equal(want.infos(), p.Producers()) {
		want = m.replay(newMState(), m.first, m.next())
	}
	require.Equal(t, want.infos(), p.Producers(), "%s: producers", what)
	require.Equal(t, want.open(), p.OpenTransactions(), "%s: open transactions", what)
	require.Equal(t, want.abortedFrom(p.LogStartOffset()), p.AbortedTransactions(p.LogStartOffset(), math.MaxInt64), "%s: aborted", what)
	var size int64
	for ord := m.first; ord < m.next(); ord++ {
		size += m.batch(ord).h.Size()
	}
	require.Equal(t, size, p.Size(), "%s: size", what)
}

func (e *edgeLog) segBases() []int64 {
	var out []int64
	for _, s := range e.p.segs {
		out = append(out, s.base)
	}
	return out
}

func (e *edgeLog) exists(base int64, suffix string) bool {
	_, err := e.fsys.ReadFile(fileName(testDir, base, suffix))
	return err == nil
}

// TestTruncateFromNextOrdinalIsNoOp: truncating at NextOrdinal touches no
// file and changes nothing, on an empty log too.
func TestTruncateFromNextOrdinalIsNoOp(t *testing.T) {
	e := newEdgeLog(t, replicaCfg())
	defer e.p.Close()
	var ops []string
	e.fsys.SetErrorHook(func(op Op, name string) error {
		ops = append(ops, string(op)+" "+name)
		return nil
	})
	require.NoError(t, e.p.TruncateFrom(1))
	require.Empty(t, ops)
	e.fsys.SetErrorHook(nil)
	e.check("empty")

	e.fill(30, 400)
	require.Greater(t, len(e.p.segs), 2)
	_, err := e.p.Sync()
	require.NoError(t, err)
	e.fsys.SetErrorHook(func(op Op, name string) error {
		ops = append(ops, string(op)+" "+name)
		return nil
	})
	require.NoError(t, e.p.TruncateFrom(e.p.NextOrdinal()))
	e.fsys.SetErrorHook(nil)
	require.Empty(t, ops)
	e.check("after the no-op")
}

// TestTruncateFromFirstOrdinalEmptiesLog: with the HW at the log start
// (as a replica opens), truncating at FirstOrdinal empties the log, and
// appends continue at the same offset and ordinal; also when the log
// start was moved up to a segment boundary.
func TestTruncateFromFirstOrdinalEmptiesLog(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		t.Run(fmt.Sprintf("deleted=%v", deleted), func(t *testing.T) {
			e := newEdgeLog(t, replicaCfg())
			e.fill(40, 500)
			_, err := e.p.Sync()
			require.NoError(t, err)
			if deleted {
				base := e.p.segs[2].base
				e.p.SetHighWatermark(base)
				_, err := e.p.DeleteRecordsBefore(base)
				require.NoError(t, err)
				e.m.first, e.m.logStart = e.p.segs[0].baseOrd, base
				require.Equal(t, base, e.m.offsetOf(e.m.first))
			}
			e.reopen()
			require.Equal(t, e.m.logStart, e.p.HighWatermark())
			first, start := e.p.FirstOrdinal(), e.p.LogStartOffset()
			require.Equal(t, e.m.first, first)

			e.truncate(first)
			require.Equal(t, first, e.p.NextOrdinal())
			require.Equal(t, first, e.p.FirstOrdinal())
			require.Equal(t, start, e.p.LogEndOffset())
			require.Equal(t, int64(0), e.p.Size())
			require.Len(t, e.p.segs, 1)
			if !deleted { // else the producers of the deleted segments may be remembered
				require.Empty(t, e.p.Producers())
				require.Empty(t, e.p.OpenTransactions())
			}
			require.Equal(t, start, e.p.LastStableOffset())
			b, n, err := e.p.ReadOrdinals([]byte("x"), first, first, 1)
			require.NoError(t, err)
			require.Equal(t, 0, n)
			require.Equal(t, []byte("x"), b)
			_, _, err = e.p.ReadOrdinals(nil, first, first+1, 1)
			require.ErrorIs(t, err, ErrOrdinalOutOfRange)
			got, err := e.p.Read(start, math.MaxInt64, 1<<20, true)
			require.NoError(t, err)
			require.Nil(t, got)
			e.m.cur = newMState()
			e.check("emptied")

			e.fill(10, 700) // continues at the same offset and ordinal
			require.Equal(t, start, e.m.batch(first).h.BaseOffset)
			e.check("refilled")
			e.reopen()
			e.check("refilled, reopened")
			e.crash()
			e.check("refilled, crashed")
			require.NoError(t, e.p.Close())

			// Emptied and crashed at once: still empty, at the same place.
			e.reopen()
			e.truncate(first)
			e.m.cur = newMState()
			e.crash()
			e.check("emptied, crashed")
			e.reopen()
			e.check("emptied, crashed, reopened")
			require.NoError(t, e.p.Close())
		})
	}
}

// TestTruncateFromAtSegmentBoundary: a cut at a segment's first batch
// leaves that segment empty and active, and the earlier ones sealed with
// their index files.
func TestTruncateFromAtSegmentBoundary(t *testing.T) {
	e := newEdgeLog(t, replicaCfg())
	e.fill(40, 500)
	_, err := e.p.Sync()
	require.NoError(t, err)
	require.Greater(t, len(e.p.segs), 4)
	k := 3
	cut := e.p.segs[k]
	ord, base := cut.baseOrd, cut.base
	later := e.segBases()[k+1:]
	e.truncate(ord)
	require.Len(t, e.p.segs, k+1)
	require.Same(t, cut, e.p.active)
	require.False(t, cut.sealed)
	require.Equal(t, int64(0), cut.size)
	require.Equal(t, base, e.p.LogEndOffset())
	for _, s := range e.p.segs[:k] {
		require.True(t, s.sealed)
		require.True(t, e.exists(s.base, indexSuffix))
		require.True(t, e.exists(s.base, timeIndexSuffix))
	}
	require.False(t, e.exists(base, indexSuffix))
	for _, b := range later {
		require.False(t, e.exists(b, logSuffix), "segment %d", b)
		require.False(t, e.exists(b, indexSuffix), "segment %d", b)
	}
	e.check("cut at a segment boundary")
	e.fill(20, 600)
	require.Equal(t, base, e.p.segs[k].base)
	e.check("refilled")
	e.crash()
	e.check("refilled, crashed")
	e.reopen()
	e.check("refilled, reopened")
	require.NoError(t, e.p.Close())
}

// TestTruncateFromInsideSealedSegment: the cut segment becomes the
// active one (its index files go), later appends fill it up to
// segment.bytes and then roll, with ordinals continuing.
func TestTruncateFromInsideSealedSegment(t *testing.T) {
	e := newEdgeLog(t, replicaCfg())
	e.fill(40, 500)
	e.reopen() // every sealed segment has index files from its roll, the HW at 0
	require.Greater(t, len(e.p.segs), 4)
	k := 2
	s := e.p.segs[k]
	require.True(t, s.sealed)
	next := e.p.segs[k+1].baseOrd
	require.Greater(t, next-s.baseOrd, int64(2))
	ord := s.baseOrd + 2
	e.truncate(ord)
	require.Len(t, e.p.segs, k+1)
	require.Same(t, s, e.p.active)
	require.False(t, s.sealed)
	require.Nil(t, s.offFile)
	require.False(t, e.exists(s.base, indexSuffix))
	require.False(t, e.exists(s.base, timeIndexSuffix))
	require.Equal(t, e.m.offsetOf(ord), s.next)
	logBytes, err := e.fsys.ReadFile(fileName(testDir, s.base, logSuffix))
	require.NoError(t, err)
	require.Equal(t, s.size, int64(len(logBytes)))
	e.check("cut inside a sealed segment")

	// Appends go into the cut segment until it is full, then roll.
	for len(e.p.segs) < k+3 {
		e.fill(1, 700)
	}
	require.LessOrEqual(t, e.p.segs[k].size, e.cfg.SegmentBytes)
	require.Greater(t, e.p.segs[k].size+e.m.batch(e.p.segs[k+1].baseOrd).h.Size(), e.cfg.SegmentBytes, "rolled only when full")
	for i := k; i+1 < len(e.p.segs); i++ {
		a, b := e.p.segs[i], e.p.segs[i+1]
		require.True(t, a.sealed)
		require.Equal(t, a.next, b.base)
		require.Equal(t, a.baseOrd+a.count, b.baseOrd)
	}
	e.check("refilled past a roll")
	e.reopen()
	e.check("reopened")
	e.crash()
	e.check("crashed")
	require.NoError(t, e.p.Close())
}

// TestReadOrdinalsAcrossSegmentsWithLimits: ReadOrdinals crosses segment
// boundaries, stops before the batch that would pass maxBytes (exactly at
// the limit is allowed) and always returns at least one batch; empty
// ranges and errors leave dst alone.
func TestReadOrdinalsAcrossSegmentsWithLimits(t *testing.T) {
	e := newEdgeLog(t, replicaCfg())
	defer e.p.Close()
	e.fill(60, 450)
	require.Greater(t, len(e.p.segs), 5)
	m := e.m
	for k := 1; k+2 < len(e.p.segs); k++ {
		// From the last batch of segment k-1, across two boundaries.
		lo := e.p.segs[k].baseOrd - 1
		hi := min(m.next(), e.p.segs[k+2].baseOrd+1)
		var sum int64
		for j := int64(1); lo+j <= hi; j++ {
			sum += m.batch(lo + j - 1).h.Size()
			for _, c := range []struct {
				maxBytes int64
				n        int64
			}{{sum, j}, {sum - 1, max(1, j-1)}} {
				got, n, err := e.p.ReadOrdinals([]byte("dst"), lo, hi, c.maxBytes)
				require.NoError(t, err)
				require.Equal(t, int(c.n), n, "[%d, %d) maxBytes %d", lo, hi, c.maxBytes)
				require.Equal(t, append([]byte("dst"), m.bytesOf(lo, lo+c.n)...), got)
			}
		}
		got, n, err := e.p.ReadOrdinals(nil, lo, hi, 0)
		require.NoError(t, err)
		require.Equal(t, 1, n, "at least one batch")
		require.Equal(t, m.bytesOf(lo, lo+1), got)
		got, n, err = e.p.ReadOrdinals(nil, lo, hi, math.MaxInt64)
		require.NoError(t, err)
		require.Equal(t, int(hi-lo), n)
		require.Equal(t, m.bytesOf(lo, hi), got)
	}
	for _, r := range [][2]int64{{m.next(), m.next() + 1}, {5, 4}, {0, 3}, {1, m.next() + 1}} {
		got, n, err := e.p.ReadOrdinals([]byte("dst"), r[0], r[1], 1<<20)
		require.ErrorIs(t, err, ErrOrdinalOutOfRange, "[%d, %d)", r[0], r[1])
		require.Equal(t, 0, n)
		require.Equal(t, []byte("dst"), got)
	}
	got, n, err := e.p.ReadOrdinals([]byte("dst"), 7, 7, 1<<20)
	require.NoError(t, err)
	require.Equal(t, 0, n)
	require.Equal(t, []byte("dst"), got)

	// Below the first ordinal after a deletion.
	base := e.p.segs[2].base
	e.p.SetHighWatermark(base)
	_, err = e.p.DeleteRecordsBefore(base)
	require.NoError(t, err)
	first := e.p.FirstOrdinal()
	_, _, err = e.p.ReadOrdinals(nil, first-1, first+1, 1<<20)
	require.ErrorIs(t, err, ErrOrdinalOutOfRange)
	got, n, err = e.p.ReadOrdinals(nil, first, first+5, 1<<20)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.Equal(t, m.bytesOf(first, first+5), got)
}

// encodeCheckpointV1 is the version 1 checkpoint (28 bytes, before
// ordinals): magic, version 1, reserved, log start, recovery point, CRC.
func encodeCheckpointV1(logStart, recoveryPoint int64) []byte {
	b := make([]byte, checkpointV1Size)
	copy(b, checkpointMagic)
	b[4] = 1
	binary.BigEndian.PutUint64(b[8:], uint64(logStart))
	binary.BigEndian.PutUint64(b[16:], uint64(recoveryPoint))
	binary.BigEndian.PutUint32(b[24:], crc(b[:24]))
	return b
}

// encodeIndexV1 is a version 1 index file (a 68-byte header, before
// ordinals, no entries) describing segment s.
func encodeIndexV1(magic string, s *segment) []byte {
	b := make([]byte, 68)
	be := binary.BigEndian
	copy(b, magic)
	b[4] = 1
	be.PutUint64(b[8:], uint64(s.base))
	be.PutUint64(b[16:], uint64(s.next))
	be.PutUint64(b[24:], uint64(s.size))
	be.PutUint64(b[32:], uint64(s.maxTs))
	be.PutUint64(b[40:], uint64(s.maxBase))
	be.PutUint64(b[48:], uint64(s.firstTs))
	be.PutUint32(b[56:], 0)
	be.PutUint32(b[60:], crc(nil))
	be.PutUint32(b[64:], crc(b[:64]))
	return b
}

// TestOldFormatCheckpointAndIndexes: a log written before ordinals
// (version 1 checkpoint and index files). A single node opens it,
// rebuilds the indexes, numbers the batches from 1 at its first segment
// and rewrites both in version 2; a replica refuses it (its ordinals are
// its raft indexes, which cannot be guessed) and changes nothing. A
// replica with a v2 checkpoint but v1 indexes rebuilds them keeping its
// ordinals; one with segments but no valid checkpoint refuses to open.
func TestOldFormatCheckpointAndIndexes(t *testing.T) {
	single := smallConfig()
	replica := replicaCfg()
	// A log with the first two segments deleted, closed cleanly.
	build := func(t *testing.T) (*MemFS, *replicaModel, []int64) {
		e := newEdgeLog(t, replica)
		e.fill(40, 500)
		base := e.p.segs[2].base
		e.p.SetHighWatermark(base)
		_, err := e.p.DeleteRecordsBefore(base)
		require.NoError(t, err)
		e.m.first, e.m.logStart = e.p.FirstOrdinal(), base
		require.Greater(t, e.m.first, int64(1))
		bases := e.segBases()
		require.NoError(t, e.p.Close())
		return e.fsys, e.m, bases
	}
	toV1 := func(t *testing.T, fsys *MemFS, bases []int64, checkpoint, indexes bool) {
		p := openMem(t, fsys.CrashClone(), replica) // for the segments' extents
		defer abandon(p)
		if checkpoint {
			require.NoError(t, fsys.WriteFile(testDir+"/"+checkpointName, encodeCheckpointV1(p.LogStartOffset(), p.LogEndOffset())))
		}
		if indexes {
			for _, s := range p.segs {
				require.NoError(t, fsys.WriteFile(fileName(testDir, s.base, indexSuffix), encodeIndexV1(offsetIndexMagic, s)))
				require.NoError(t, fsys.WriteFile(fileName(testDir, s.base, timeIndexSuffix), encodeIndexV1(timeIndexMagic, s)))
			}
		}
		require.Equal(t, bases, func() []int64 {
			var out []int64
			for _, s := range p.segs {
				out = append(out, s.base)
			}
			return out
		}())
	}
	version := func(t *testing.T, fsys *MemFS, name string) byte {
		b, err := fsys.ReadFile(name)
		require.NoError(t, err)
		return b[4]
	}

	t.Run("single node renumbers from 1", func(t *testing.T) {
		fsys, m, bases := build(t)
		toV1(t, fsys, bases, true, true)
		p := openMem(t, fsys, single)
		require.Equal(t, int64(1), p.FirstOrdinal())
		require.Equal(t, m.next()-m.first+1, p.NextOrdinal())
		require.Equal(t, m.logStart, p.LogStartOffset())
		for ord := m.first; ord <= m.next(); ord++ {
			off, err := p.OrdinalOffset(ord - m.first + 1)
			require.NoError(t, err)
			require.Equal(t, m.offsetOf(ord), off)
		}
		got, _, err := p.ReadOrdinals(nil, 1, p.NextOrdinal(), math.MaxInt64)
		require.NoError(t, err)
		require.True(t, bytes.Equal(m.bytesOf(m.first, m.next()), got))
		for _, s := range p.segs[:len(p.segs)-1] {
			require.Equal(t, byte(indexVersion), version(t, fsys, fileName(testDir, s.base, indexSuffix)))
			require.Equal(t, byte(indexVersion), version(t, fsys, fileName(testDir, s.base, timeIndexSuffix)))
		}
		require.NoError(t, p.Close())
		require.Equal(t, byte(checkpointVersion), version(t, fsys, testDir+"/"+checkpointName))
		// The new numbering is durable: a replica now opens it too.
		p = openMem(t, fsys, replica)
		require.Equal(t, int64(1), p.FirstOrdinal())
		require.Equal(t, m.next()-m.first+1, p.NextOrdinal())
		require.NoError(t, p.Close())
	})
	t.Run("replica refuses a v1 checkpoint", func(t *testing.T) {
		fsys, _, bases := build(t)
		toV1(t, fsys, bases, true, true)
		before, err := fsys.ReadFile(testDir + "/" + checkpointName)
		require.NoError(t, err)
		names, err := fsys.ReadDir(testDir)
		require.NoError(t, err)
		_, err = Open(fsys, testDir, replica, testLogger(t))
		require.ErrorIs(t, err, ErrCorruption)
		after, err := fsys.ReadFile(testDir + "/" + checkpointName)
		require.NoError(t, err)
		require.Equal(t, before, after, "the checkpoint is left as it was")
		names2, err := fsys.ReadDir(testDir)
		require.NoError(t, err)
		require.Equal(t, names, names2)
	})
	t.Run("replica rebuilds v1 indexes keeping its ordinals", func(t *testing.T) {
		fsys, m, bases := build(t)
		toV1(t, fsys, bases, false, true)
		p := openMem(t, fsys, replica)
		require.Equal(t, m.first, p.FirstOrdinal())
		require.Equal(t, m.next(), p.NextOrdinal())
		for ord := m.first; ord <= m.next(); ord++ {
			off, err := p.OrdinalOffset(ord)
			require.NoError(t, err)
			require.Equal(t, m.offsetOf(ord), off)
		}
		for _, s := range p.segs[:len(p.segs)-1] {
			require.Equal(t, byte(indexVersion), version(t, fsys, fileName(testDir, s.base, indexSuffix)))
		}
		require.NoError(t, p.Close())
	})
	t.Run("replica without a valid checkpoint", func(t *testing.T) {
		fsys, _, _ := build(t)
		name := testDir + "/" + checkpointName
		b, err := fsys.ReadFile(name)
		require.NoError(t, err)
		b[10] ^= 1
		require.NoError(t, fsys.WriteFile(name, b))
		_, err = Open(fsys, testDir, replica, testLogger(t))
		require.ErrorIs(t, err, ErrCorruption, "damaged checkpoint")
		require.NoError(t, fsys.Remove(name))
		_, err = Open(fsys, testDir, replica, testLogger(t))
		require.ErrorIs(t, err, ErrCorruption, "no checkpoint")
		// A single node opens it, from ordinal 1.
		p := openMem(t, fsys, single)
		require.Equal(t, int64(1), p.FirstOrdinal())
		require.NoError(t, p.Close())
		// A new replica log (no segments, no checkpoint) is fine.
		p, err = Open(NewMemFS(), testDir, replica, testLogger(t))
		require.NoError(t, err)
		require.Equal(t, int64(1), p.NextOrdinal())
		require.NoError(t, p.Close())
	})
}

// TestReplicatedBatchLargerThanASegment: a replica stores a replicated
// batch larger than segment.bytes (lowered after the batch was
// produced, by a topic config change), in a segment of its own, and
// reads it back after a clean reopen and a crash: a follower must hold
// what the majority holds whatever its config says now.
func TestReplicatedBatchLargerThanASegment(t *testing.T) {
	cfg := replicaCfg()
	cfg.SegmentBytes = 4096
	e := newEdgeLog(t, cfg)
	e.fill(3, 500)
	e.add(testBatch(1, 10_000, -1, 0, 0)) // over 4 KiB
	e.fill(3, 500)
	e.check("appended")
	e.reopen()
	e.check("reopened")
	e.crash()
	e.check("after a crash")
	require.GreaterOrEqual(t, len(e.segBases()), 3, "the large batch rolled segments")
}
