package log

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readCheckpoint returns the recovery point in the partition's
// checkpoint file.
func readCheckpoint(t *testing.T, fsys *MemFS) int64 {
	t.Helper()
	raw, err := fsys.ReadFile(filepath.Join(testDir, checkpointName))
	require.NoError(t, err)
	c, ok := decodeCheckpoint(raw)
	require.True(t, ok)
	return c.recoveryPoint
}

// TestSyncMovesCheckpoint: a Sync rewrites the checkpoint with the recovery
// point it made durable once the last write is older than
// CheckpointIntervalMs, and not before; a negative interval leaves it to
// rolls and Close (Kafka's log.flush.offset.checkpoint.interval.ms).
func TestSyncMovesCheckpoint(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 3))
	for _, every := range []int64{1, 3_600_000, -1} {
		fsys := NewMemFS()
		cfg := DefaultConfig()
		cfg.CheckpointIntervalMs = every
		p := openMem(t, fsys, cfg)
		appendN(t, p, rng, 20)
		time.Sleep(5 * time.Millisecond)
		durable, err := p.Sync()
		require.NoError(t, err)
		if every == 1 {
			require.Equal(t, durable, readCheckpoint(t, fsys), "interval passed: written")
		} else {
			require.Zero(t, readCheckpoint(t, fsys), "interval %d: not written", every)
		}
		require.NoError(t, p.Close())
		require.Equal(t, durable, readCheckpoint(t, fsys), "Close writes it")
	}
}

// TestCrashRecoversFromCheckpoint: after a crash, the active segment's
// batches below the checkpoint's recovery point are trusted (read by
// their headers, as a sealed segment's are by its index files) and those
// above it are CRC-checked, a damaged one truncating the log there; what
// was fsynced is kept, what was not is lost.
func TestCrashRecoversFromCheckpoint(t *testing.T) {
	t.Parallel()
	for _, damage := range []string{"none", "below", "above"} {
		t.Run(damage, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(5, 5))
			fsys := NewMemFS()
			cfg := DefaultConfig() // one segment
			cfg.CheckpointIntervalMs = 1
			p := openMem(t, fsys, cfg)
			below := appendN(t, p, rng, 10)
			time.Sleep(5 * time.Millisecond)
			ckpt, err := p.Sync()
			require.NoError(t, err)
			require.Equal(t, ckpt, readCheckpoint(t, fsys))
			cfg.CheckpointIntervalMs = -1
			p.SetConfig(cfg)
			above := appendN(t, p, rng, 10)
			durable, err := p.Sync()
			require.NoError(t, err)
			require.Equal(t, ckpt, readCheckpoint(t, fsys), "not moved again")
			appendN(t, p, rng, 5) // lost at the crash
			name := activeLogName(p)

			crashed := fsys.CrashClone()
			data, err := crashed.ReadFile(name)
			require.NoError(t, err)
			pos := func(batches [][]byte, i int) int { // a byte inside batch i's records
				n := 0
				for _, b := range batches[:i] {
					n += len(b)
				}
				return n + len(batches[i]) - 3
			}
			want := append(append([][]byte{}, below...), above...)
			switch damage {
			case "below":
				// Trusted, as a sealed segment's batches are: not
				// CRC-checked by Open.
				data[pos(below, 4)] ^= 0xff
			case "above":
				data[len(bytesOf(below))+pos(above, 6)] ^= 0xff
				want = want[:len(below)+6]
			}
			require.NoError(t, crashed.WriteFile(name, data))

			p2 := openMem(t, crashed, cfg)
			defer p2.Close()
			if damage == "below" {
				// Open did not read it; a consumer's CRC check would.
				require.Equal(t, durable, p2.LogEndOffset())
				return
			}
			_, got := readAll(t, p2, 0)
			require.Equal(t, want, got)
			if damage == "none" {
				require.Equal(t, durable, p2.LogEndOffset())
			}
		})
	}
}

func bytesOf(batches [][]byte) []byte {
	var out []byte
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}
