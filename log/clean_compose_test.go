package log

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/protocol"
)

// DeleteRecords and cleanup.policy=compact,delete compose as in Kafka:
// the log start offset moves past cleaned and uncleaned records alike,
// the cleaner never brings back anything below it, and time and size
// retention delete whole segments of a compacted log.
func TestCleanComposesWithDeleteRecordsAndRetention(t *testing.T) {
	cfg := compactConfig()
	cfg.Cleanup = CleanupCompactDelete
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	rng := rand.New(rand.NewSource(11))
	written := fillKeyed(t, p, rng, 3000, 40, true, false)
	m := NewOffsetMap(1<<20, 0.9)
	st := cleanFully(t, p, m, testNow)
	require.NotEmpty(t, st)

	// DeleteRecords in the middle of the cleaned log: nothing below the
	// new start is read, what is above is the compacted log as before.
	got := readRecords(t, p)
	cut := got[len(got)/2].off
	start, err := p.DeleteRecordsBefore(cut)
	require.NoError(t, err)
	require.Equal(t, cut, start)
	above := func(rs []rec, from int64) []rec {
		var out []rec
		for _, r := range rs {
			if r.off >= from {
				out = append(out, r)
			}
		}
		return out
	}
	require.Equal(t, above(got, cut), above(readRecords(t, p), cut))

	// More updates and another clean: still nothing below the start, and
	// above it the table of everything written at or after the start.
	written = append(written, fillKeyed(t, p, rng, 2000, 40, true, false)...)
	cleanFully(t, p, m, testNow)
	require.Equal(t, cut, p.LogStartOffset())
	after := readRecords(t, p)
	require.GreaterOrEqual(t, after[0].off, cut)
	require.Equal(t, table(above(written, cut)), table(after))

	// A reopen keeps the start and the table.
	require.NoError(t, p.Close())
	p = openMem(t, fsys, cfg)
	require.Equal(t, cut, p.LogStartOffset())
	require.Equal(t, table(above(written, cut)), table(readRecords(t, p)))

	// Size retention on the compacted log: whole segments go from the
	// front until the log fits; the cleaner goes on above them.
	cfg.RetentionBytes = p.Size() / 2
	p.SetConfig(cfg)
	_, err = p.EnforceRetention(testNow)
	require.NoError(t, err)
	require.LessOrEqual(t, p.Size(), cfg.RetentionBytes+int64(cfg.SegmentBytes))
	newStart := p.LogStartOffset()
	require.Greater(t, newStart, cut)
	written = append(written, fillKeyed(t, p, rng, 500, 40, false, false)...)
	cleanFully(t, p, m, testNow)
	require.Equal(t, table(above(written, newStart)), table(readRecords(t, p)))

	// Time retention: every sealed segment is older than retention.ms.
	cfg.RetentionBytes, cfg.RetentionMs = -1, 1000
	p.SetConfig(cfg)
	_, err = p.EnforceRetention(time.UnixMilli(baseTime + 3_600_000))
	require.NoError(t, err)
	require.Equal(t, p.LogEndOffset(), p.LogStartOffset())
	require.Empty(t, readRecords(t, p))
	require.NoError(t, p.Close())
}

// Reads and appends go on while the cleaner rewrites and swaps
// segments: every read returns whole, valid batches, contiguous from
// where it started (offsets that were cleaned away are covered by the
// empty batches holding their offsets), and the final table is right.
func TestCleanWhileReadingAndAppending(t *testing.T) {
	p := openMem(t, NewMemFS(), compactConfig())
	rng := rand.New(rand.NewSource(12))
	written := fillKeyed(t, p, rng, 3000, 30, true, false)

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr := rand.New(rand.NewSource(int64(100 + r)))
			for !stop.Load() {
				hw := p.HighWatermark()
				from := p.LogStartOffset() + rr.Int63n(max(1, hw-p.LogStartOffset()))
				b, err := p.Read(from, hw, 1+rr.Intn(64<<10), true)
				if err != nil {
					errs <- err
					return
				}
				batches, err := protocol.SplitBatches(b)
				if err != nil {
					errs <- err
					return
				}
				next := int64(-1)
				for _, batch := range batches {
					h, err := protocol.ParseBatchHeader(batch)
					if err == nil && !protocol.VerifyBatchCRC(batch) {
						err = errors.New("bad CRC")
					}
					if err != nil {
						errs <- err
						return
					}
					if next >= 0 && h.BaseOffset != next {
						errs <- errGap{next, h.BaseOffset}
						return
					}
					if next < 0 && h.LastOffset() < from {
						errs <- errGap{from, h.LastOffset()}
						return
					}
					next = h.LastOffset() + 1
				}
			}
		}()
	}
	m := NewOffsetMap(24*64, 0.9) // several passes
	cleanErr := make(chan error, 1)
	var appending atomic.Bool
	appending.Store(true)
	var cleans, swaps int
	go func() {
		for appending.Load() {
			st, err := p.Clean(CleanOptions{Now: testNow, Map: m, Codec: gzipCodec{}})
			if err != nil {
				cleanErr <- err
				return
			}
			cleans++
			swaps += st.Segments
		}
		cleanErr <- nil
	}()
	wr := rand.New(rand.NewSource(13))
	for range 20 {
		written = append(written, fillKeyed(t, p, wr, 200, 30, true, false)...)
	}
	appending.Store(false)
	require.NoError(t, <-cleanErr)
	t.Logf("%d cleans swapped %d segments while appending and reading", cleans, swaps)
	require.Positive(t, swaps)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cleanFully(t, p, NewOffsetMap(1<<20, 0.9), testNow)
	require.Equal(t, table(written), table(readRecords(t, p)))
	require.NoError(t, p.Close())
}

type errGap struct{ want, got int64 }

func (e errGap) Error() string {
	return fmt.Sprintf("read not contiguous: want offset %d, got %d", e.want, e.got)
}
