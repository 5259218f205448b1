package log

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A failed unlink during deletion is only logged ("deleted by the next
// Open"); a leftover segment below the log start, followed by the gap its
// deleted successors left, made Open fail with ErrCorruption. Open now
// drops it first. (Found by review.)
func TestLeftoverSegmentBelowLogStart(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	for range 4 {
		mustAppend(t, p, testBatch(1, 3000, -1, 0, 0)) // one batch per segment: 0,1,2,3
	}
	_, err := p.Sync()
	require.NoError(t, err)
	fsys.SetErrorHook(func(op Op, name string) error {
		if op == OpRemove && strings.HasSuffix(name, "00000000000000000000.log") {
			return errors.New("EIO")
		}
		return nil
	})
	_, err = p.DeleteRecordsBefore(2) // drops segments 0 and 1
	require.NoError(t, err)
	fsys.SetErrorHook(nil)
	require.NoError(t, p.Close())
	q, err := Open(fsys, "/data/topic-0", cfg, testLogger(t))
	require.NoError(t, err)
	require.Equal(t, int64(2), q.LogStartOffset())
}
