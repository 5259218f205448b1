package log

import (
	"bytes"
	"errors"
	"fmt"
	randv2 "math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reviewZeroCfg: small segments, zeros ahead, a checkpoint at most Syncs,
// segment.ms short enough for EnforceRetention to roll.
func reviewZeroCfg() Config {
	c := zeroAheadConfig()
	c.SegmentBytes, c.IndexIntervalBytes, c.ZeroAheadBytes = 6<<10, 512, 4<<10
	c.CheckpointIntervalMs, c.SegmentMs = 1, 60_000
	return c
}

// TestReviewZeroAheadCrashEverywhere loses power (torn writes included) at
// every file operation of a mixed run: small and large appends (so
// smallSyncs flips both ways), appends left unsynced across rolls,
// EnforceRetention rolls, DeleteRecords, Close and reopen (so crashes
// also hit Close and recovery itself). Every batch below what a Sync or
// Close returned must come back byte for byte, and Open must not fail.
func TestReviewZeroAheadCrashEverywhere(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			cfg := reviewZeroCfg()
			type wb struct {
				off int64
				b   []byte
			}
			run := func(fsys *MemFS, p **Partition, written *[]wb, synced *int64) error {
				rng := randv2.New(randv2.NewPCG(seed, 99))
				now := testNow
				for i := range 160 {
					n, size := 1, 60+rng.IntN(200)
					if rng.IntN(12) == 0 {
						n, size = 8, 400 // a large Sync: smallSyncs off
					}
					b := testBatch(n, size, -1, 0, 0)
					res, err := (*p).Append(b, now)
					if err != nil {
						return err
					}
					*written = append(*written, wb{res.BaseOffset, b})
					(*p).SetHighWatermark(res.LastOffset + 1)
					switch r := rng.IntN(20); {
					case r < 3: // leave it unsynced (a roll may come next)
						continue
					case r == 3:
						now = now.Add(2 * time.Minute)
						if _, err := (*p).EnforceRetention(now); err != nil {
							return err
						}
					case r == 4:
						if _, err := (*p).DeleteRecordsBefore(max(0, res.LastOffset-30)); err != nil {
							return err
						}
					case r == 5:
						leo := (*p).LogEndOffset()
						if err := (*p).Close(); err != nil {
							return err
						}
						*synced = leo
						q, err := Open(fsys, "/data/topic-0", cfg, testLogger(t))
						if err != nil {
							return err
						}
						*p = q
						continue
					}
					end, err := (*p).Sync()
					if err != nil {
						return err
					}
					*synced = end
					_ = i
				}
				return nil
			}
			steps := 0
			for n := 1; ; n++ {
				fsys := NewMemFS()
				p := openMem(t, fsys, cfg)
				fsys.SetCrashPoint(n, randv2.New(randv2.NewPCG(uint64(n), seed)))
				var written []wb
				var synced int64
				err := run(fsys, &p, &written, &synced)
				crashed := fsys.Crashed()
				if crashed == nil {
					require.NoError(t, err)
					steps = n
					break
				}
				require.True(t, errors.Is(err, ErrPowerLost), "step %d: %v", n, err)
				ctx := fmt.Sprintf("seed %d, crash at step %d", seed, n)
				q, err := Open(crashed, "/data/topic-0", cfg, testLogger(t))
				require.NoError(t, err, ctx)
				require.GreaterOrEqual(t, q.LogEndOffset(), synced, "%s: synced batches lost", ctx)
				q.SetHighWatermark(q.LogEndOffset())
				hs, bs := readAll(t, q, q.LogStartOffset())
				requireContiguous(t, hs, q.LogStartOffset(), q.LogEndOffset())
				byOff := map[int64][]byte{}
				for _, w := range written {
					byOff[w.off] = w.b
				}
				for i, h := range hs {
					want, ok := byOff[h.BaseOffset]
					require.True(t, ok, "%s: batch at %d was never written", ctx, h.BaseOffset)
					require.True(t, bytes.Equal(want, bs[i]), "%s: batch at %d differs", ctx, h.BaseOffset)
				}
				// On from there, and again after a clean restart.
				leo := q.LogEndOffset()
				mustAppend(t, q, testBatch(2, 90, -1, 0, 0))
				_, err = q.Sync()
				require.NoError(t, err, ctx)
				require.NoError(t, q.Close(), ctx)
				r := openMem(t, crashed, cfg)
				require.Equal(t, leo+2, r.LogEndOffset(), ctx)
				require.NoError(t, r.Close())
			}
			t.Logf("seed %d: %d file operations", seed, steps)
			require.Greater(t, steps, 300)
		})
	}
}

// TestReviewZeroAheadCleanCrash: a compacted log with zeros ahead of its
// active segment, Clean interleaved with appends and Syncs, power lost at
// every step: the synced records come back at their offsets.
func TestReviewZeroAheadCleanCrash(t *testing.T) {
	cfg := compactConfig()
	cfg.ZeroAheadBytes = 4 << 10
	cfg.CheckpointIntervalMs = 1
	run := func(p *Partition, all *[]rec, synced *int64) error {
		rng := randv2.New(randv2.NewPCG(4, 4))
		for i := range 200 {
			k := 1 + rng.IntN(3)
			var recs []kv
			for j := range k {
				recs = append(recs, kv{fmt.Appendf(nil, "k%02d", rng.IntN(15)), fmt.Appendf(nil, "v%d.%d", i, j)})
			}
			res, err := p.Append(keyedBatch(t, recs, -1, 0, baseTime, false), testNow)
			if err != nil {
				return err
			}
			p.SetHighWatermark(res.LastOffset + 1)
			for j, r := range recs {
				*all = append(*all, rec{off: res.BaseOffset + int64(j), key: string(r.key), val: string(r.value)})
			}
			if rng.IntN(4) != 0 {
				end, err := p.Sync()
				if err != nil {
					return err
				}
				*synced = end
			}
			if i%25 == 24 {
				if _, err := p.Clean(CleanOptions{Now: testNow, Map: NewOffsetMap(1<<12, 0.9), Codec: gzipCodec{}}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for n := 1; ; n++ {
		fsys := NewMemFS()
		p := openMem(t, fsys, cfg)
		fsys.SetCrashPoint(n, randv2.New(randv2.NewPCG(uint64(n), 11)))
		var all []rec
		var synced int64
		err := run(p, &all, &synced)
		crashed := fsys.Crashed()
		if crashed == nil {
			require.NoError(t, err)
			break
		}
		ctx := fmt.Sprintf("crash at step %d", n)
		q, err := Open(crashed, "/data/topic-0", cfg, testLogger(t))
		require.NoError(t, err, ctx)
		require.GreaterOrEqual(t, q.LogEndOffset(), synced, ctx)
		got := readRecords(t, q)
		byOff := map[int64]rec{}
		for _, r := range all {
			byOff[r.off] = r
		}
		for _, r := range got {
			require.Equal(t, byOff[r.off], r, ctx)
		}
		// The table of what was synced survives.
		var durable []rec
		for _, r := range all {
			if r.off < synced {
				durable = append(durable, r)
			}
		}
		tab := table(got)
		for k, r := range table(durable) {
			g, ok := tab[k]
			require.True(t, ok, "%s: key %s lost", ctx, k)
			require.GreaterOrEqual(t, g.off, r.off, "%s: key %s went back", ctx, k)
		}
		require.NoError(t, q.Close())
	}
}

// TestReviewZeroTailBelowRecoveryPointKeepsEvidence: the last segment's
// fsynced tail reads back as zeros (a device that lost an acknowledged
// flush). Open must report ErrCorruption, as it did before zeros ahead,
// and (recover.go: "checked before truncating: keep the evidence") leave
// the file as it found it. The zero-tail branch of phase 3 cuts (and
// fsyncs) it first, even with ZeroAheadBytes 0, where no zero tail can
// be zeros written ahead. The repeat Open still fails (nothing is
// accepted silently).
func TestReviewZeroTailBelowRecoveryPointKeepsEvidence(t *testing.T) {
	cfg := smallConfig()
	cfg.ZeroAheadBytes = 0
	cfg.CheckpointIntervalMs = 1
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	var last AppendResult
	for range 5 {
		last = mustAppend(t, p, testBatch(1, 100, -1, 0, 0))
	}
	time.Sleep(5 * time.Millisecond) // the Sync moves the recovery point
	_, err := p.Sync()
	require.NoError(t, err)
	crashed := fsys.CrashClone()
	abandon(p)

	name := fileName("/data/topic-0", p.active.base, logSuffix)
	data, err := crashed.ReadFile(name)
	require.NoError(t, err)
	// The last (fsynced) batch reads back as zeros.
	b := testBatch(1, 100, -1, 0, 0)
	for i := len(data) - len(b); i < len(data); i++ {
		data[i] = 0
	}
	require.NoError(t, crashed.WriteFile(name, data))
	require.Equal(t, last.LastOffset+1, p.checkpointed, "the recovery point covers the last batch")

	_, err = Open(crashed, "/data/topic-0", cfg, testLogger(t))
	require.ErrorIs(t, err, ErrCorruption)
	after, err := crashed.CrashClone().ReadFile(name)
	require.NoError(t, err)
	_, err = Open(crashed, "/data/topic-0", cfg, testLogger(t))
	require.ErrorIs(t, err, ErrCorruption, "a repeat Open accepts the loss")
	require.Equal(t, len(data), len(after), "Open cut (durably) the damaged segment before reporting the damage")
}
