package log

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReviewTruncateFromEveryCrashPoint fails the i-th file operation of
// TruncateFrom (which aborts it, or for a segment removal skips it) and
// then crashes: Open must accept the result, the log must be a prefix of
// the old one no shorter than the cut, and the producer state must be
// what a replay from the log's start builds.
func TestReviewTruncateFromEveryCrashPoint(t *testing.T) {
	cfg := smallConfig()
	cfg.Replica = true
	for _, cutAt := range []string{"mid", "base"} {
		for i := 1; ; i++ {
			fsys := NewMemFS()
			p := openMem(t, fsys, cfg)
			var old [][]byte
			for j := range 60 {
				b := withOffset(testBatch(2, 80, 7, 0, int32(2*j)), p.LogEndOffset())
				_, err := p.AppendReplicated(b, testNow)
				require.NoError(t, err)
				old = append(old, b)
				_, err = p.Sync()
				require.NoError(t, err)
			}
			require.GreaterOrEqual(t, len(p.segs), 4)
			ord := p.segs[1].baseOrd
			if cutAt == "mid" {
				ord += 3
			}
			n := 0
			fsys.SetErrorHook(func(op Op, name string) error {
				if op == OpRead || op == OpReadDir {
					return nil
				}
				n++
				if n == i {
					return fmt.Errorf("crash at op %d (%s %s)", n, op, name)
				}
				return nil
			})
			_ = p.TruncateFrom(ord)
			fsys.SetErrorHook(nil)
			done := n < i // the i-th operation was never reached
			crashed := fsys.CrashClone()
			q, err := Open(crashed, reviewDir, cfg, nil)
			require.NoError(t, err, "%s op %d", cutAt, i)
			next := q.NextOrdinal()
			require.GreaterOrEqual(t, next, ord, "%s op %d", cutAt, i)
			require.LessOrEqual(t, next, int64(61))
			got, _, err := q.ReadOrdinals(nil, 1, next, 1<<30)
			require.NoError(t, err)
			var want []byte
			for _, b := range old[:next-1] {
				want = append(want, b...)
			}
			require.Equal(t, want, got, "%s op %d", cutAt, i)
			prod := q.Producers()
			require.NoError(t, q.Close())
			// Fresh replay: no snapshots.
			fresh := crashed.CrashClone()
			names, _ := fresh.ReadDir(reviewDir)
			for _, nm := range names {
				if strings.HasSuffix(nm, snapshotSuffix) {
					require.NoError(t, fresh.Remove(reviewDir+"/"+nm))
				}
			}
			r, err := Open(fresh, reviewDir, cfg, nil)
			require.NoError(t, err)
			require.Equal(t, r.Producers(), prod, "%s op %d", cutAt, i)
			require.NoError(t, r.Close())
			_ = p.Close()
			if done {
				break
			}
		}
	}
}
