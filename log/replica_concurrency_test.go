package log

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shoal-mq/shoal/protocol"
)

// committedView is what a concurrency test's writer has committed (the
// batches below the HW), published to the readers before the HW is
// raised. Its slices only grow: committed batches never change.
type committedView struct {
	mu      sync.RWMutex
	hw      int64
	offsets []int64 // base offset of ordinal i+1
	batches [][]byte
	end     int64        // the offset after the last committed batch
	aborted []AbortedTxn // the aborted transactions whose marker is below hw

	readers atomic.Int64 // checks done, for the log
	errs    atomic.Int64 // errors reported
	failed  atomic.Bool  // a reader reported an error: all stop
	stop    atomic.Bool  // the writer is done
}

type viewSnapshot struct {
	hw      int64
	offsets []int64
	batches [][]byte
	end     int64
	aborted []AbortedTxn
}

func (v *committedView) snapshot() viewSnapshot {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return viewSnapshot{hw: v.hw, offsets: v.offsets, batches: v.batches, end: v.end, aborted: v.aborted}
}

// ords returns the committed ordinals' end: batches [1, ords) are committed.
func (s *viewSnapshot) ords() int64 { return int64(len(s.batches)) + 1 }

// publish extends the view with the model's batches below hw.
func (v *committedView) publish(m *replicaModel, hw int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if hw <= v.hw {
		return
	}
	for ord := int64(len(v.batches)) + 1; ord < m.next() && m.batch(ord).h.LastOffset() < hw; ord++ {
		b := m.batch(ord)
		v.offsets = append(v.offsets, b.h.BaseOffset)
		v.batches = append(v.batches, b.b)
		v.end = b.next()
	}
	v.hw = hw
	var aborted []AbortedTxn
	for _, a := range m.cur.aborted {
		if a.LastOffset < hw {
			aborted = append(aborted, a)
		}
	}
	v.aborted = aborted
}

// TestReplicaConcurrentReadersDuringTruncation runs readers (Read up to
// the HW, ReadOrdinals, OrdinalOffset, AbortedTransactions,
// LastStableOffset) while one writer appends replicated batches, syncs,
// raises the HW and truncates above it. Readers may see batches above the
// HW come and go (ErrOrdinalOutOfRange), never an error otherwise, and
// the committed batches never change. Run it with -race.
func TestReplicaConcurrentReadersDuringTruncation(t *testing.T) {
	t.Parallel()
	cfg := replicaCfg()
	fsys := NewMemFS()
	r := &modelRun{t: t, seed: 9, rng: rand.New(rand.NewPCG(9, 9)), cfg: cfg, fsys: fsys, m: newReplicaModel(), ops: map[string]int{}}
	r.op = "open"
	r.open()
	p := r.p
	view := &committedView{}
	report := func(format string, args ...any) {
		if view.errs.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
		view.failed.Store(true)
	}

	var wg sync.WaitGroup
	for id := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), 1))
			for !view.stop.Load() && !view.failed.Load() {
				checkReader(p, view, rng, report)
				view.readers.Add(1)
			}
		}()
	}

	steps := 800
	if testing.Short() {
		steps = 300
	}
	m := r.m
	for r.step = 1; r.step <= steps && !view.failed.Load(); r.step++ {
		switch k := r.rng.IntN(100); {
		case k < 60:
			r.op = "append"
			r.opAppend()
		case k < 75:
			r.op = "sync and commit"
			r.opSync()
			ord := m.ordAt(m.hw) + r.rng.Int64N(m.durable-m.ordAt(m.hw)+1)
			hw := max(m.hw, m.offsetOf(ord))
			view.publish(m, hw) // before the HW moves: readers may then rely on it
			p.SetHighWatermark(hw)
			m.hw = hw
		case k < 95:
			r.op = "truncate"
			r.opTruncate()
		default:
			r.op = "check"
		}
		if r.op == "truncate" || r.step%10 == 0 {
			r.check(r.step%200 == 0)
		}
	}
	view.stop.Store(true)
	wg.Wait()
	t.Logf("%d writer steps, %d batches, HW %d, %d reader checks", r.step-1, m.next()-1, m.hw, view.readers.Load())
	if !t.Failed() {
		r.check(true)
	}
	abandon(p)
}

// checkReader does one random read and checks it against the committed
// view.
func checkReader(p *Partition, view *committedView, rng *rand.Rand, report func(string, ...any)) {
	v := view.snapshot()
	switch rng.IntN(5) {
	case 0: // Read below the HW: committed batches only, never an error
		if v.end == 0 {
			return
		}
		off := rng.Int64N(v.end)
		b, err := p.Read(off, v.hw, 1+rng.IntN(10_000), true)
		if err != nil {
			report("Read(%d, %d): %v", off, v.hw, err)
			return
		}
		batches, err := protocol.SplitBatches(b)
		if err != nil || len(batches) == 0 {
			report("Read(%d, %d): %d bytes, %d batches, %v", off, v.hw, len(b), len(batches), err)
			return
		}
		for _, batch := range batches {
			h, _ := protocol.ParseBatchHeader(batch)
			i := sort.Search(len(v.offsets), func(i int) bool { return v.offsets[i] >= h.BaseOffset })
			if i == len(v.offsets) || v.offsets[i] != h.BaseOffset || !bytes.Equal(v.batches[i], batch) {
				report("Read(%d, %d): batch at %d is not the committed one", off, v.hw, h.BaseOffset)
				return
			}
		}
	case 1: // ReadOrdinals of committed batches: exact, never an error
		ords := v.ords()
		lo := 1 + rng.Int64N(ords)
		hi := min(ords, lo+rng.Int64N(30))
		maxBytes := rng.Int64N(12_000)
		got, n, err := p.ReadOrdinals(nil, lo, hi, maxBytes)
		if err != nil {
			report("ReadOrdinals(%d, %d) of committed batches: %v", lo, hi, err)
			return
		}
		var want []byte
		total, wantN := int64(0), 0
		for ord := lo; ord < hi; ord++ {
			b := v.batches[ord-1]
			if wantN > 0 && total+int64(len(b)) > maxBytes {
				break
			}
			want, total, wantN = append(want, b...), total+int64(len(b)), wantN+1
		}
		if n != wantN || !bytes.Equal(want, got) {
			report("ReadOrdinals(%d, %d, %d): %d batches, want %d (or other bytes)", lo, hi, maxBytes, n, wantN)
		}
	case 2: // ReadOrdinals into the uncommitted tail: ranges may vanish
		next := p.NextOrdinal()
		lo := max(1, next-rng.Int64N(40))
		hi := min(next, lo+rng.Int64N(30))
		prefix := []byte("dst")
		got, n, err := p.ReadOrdinals(slices.Clone(prefix), lo, hi, 1<<30)
		if errors.Is(err, ErrOrdinalOutOfRange) {
			if !bytes.Equal(prefix, got) {
				report("ReadOrdinals(%d, %d) changed dst on error", lo, hi)
			}
			return
		}
		if err != nil {
			report("ReadOrdinals(%d, %d): %v", lo, hi, err)
			return
		}
		if !bytes.HasPrefix(got, prefix) {
			report("ReadOrdinals(%d, %d) lost dst", lo, hi)
			return
		}
		batches, err := protocol.SplitBatches(got[len(prefix):])
		if err != nil || len(batches) != n || int64(n) != hi-lo {
			report("ReadOrdinals(%d, %d): %d batches, split %d, %v", lo, hi, n, len(batches), err)
			return
		}
		var expect int64 = -1
		for i, batch := range batches {
			h, _ := protocol.ParseBatchHeader(batch)
			if !protocol.VerifyBatchCRC(batch) || expect >= 0 && h.BaseOffset != expect {
				report("ReadOrdinals(%d, %d): batch %d at %d is damaged or not contiguous", lo, hi, lo+int64(i), h.BaseOffset)
				return
			}
			expect = h.LastOffset() + 1
			if ord := lo + int64(i); ord < v.ords() && !bytes.Equal(v.batches[ord-1], batch) {
				report("ReadOrdinals(%d, %d): committed batch %d changed", lo, hi, ord)
				return
			}
		}
	case 3: // OrdinalOffset: committed ordinals are fixed, the rest may vanish
		ords := v.ords()
		ord := 1 + rng.Int64N(ords+3)
		off, err := p.OrdinalOffset(ord)
		switch {
		case ord < ords && (err != nil || off != v.offsets[ord-1]):
			report("OrdinalOffset(%d) = %d, %v; committed at %d", ord, off, err, v.offsets[ord-1])
		case ord == ords && (err != nil || off != v.end):
			report("OrdinalOffset(%d) = %d, %v; the first uncommitted batch starts at %d", ord, off, err, v.end)
		case ord > ords && err != nil && !errors.Is(err, ErrOrdinalOutOfRange):
			report("OrdinalOffset(%d): %v", ord, err)
		case ord > ords && err == nil && off < v.end:
			report("OrdinalOffset(%d) = %d below the committed end %d", ord, off, v.end)
		}
	default: // the aborted index below the HW is fixed; LSO <= HW
		var got []AbortedTxn
		for _, a := range p.AbortedTransactions(0, v.hw) {
			if a.LastOffset < v.hw {
				got = append(got, a)
			}
		}
		if !slices.Equal(v.aborted, got) {
			report("AbortedTransactions below the HW %d: %v, want %v", v.hw, got, v.aborted)
		}
		lso := p.LastStableOffset()
		if hw := p.HighWatermark(); lso > hw {
			report("LastStableOffset %d above the HW %d", lso, hw)
		}
	}
}
