package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
)

// FuzzChangeLogFrames: segment bytes from disk (anything a crash or a bad
// disk leaves) never panic the frame parser or decoder, frames never
// reach past the input, and a payload that decodes encodes back to
// entries that decode the same.
func FuzzChangeLogFrames(f *testing.F) {
	_, eff, err := sharegroup.New(sharegroup.DefaultConfig(), 1, 0)
	require.NoError(f, err)
	p, err := appendEntry([]byte{frameVersion}, PartitionRecords{Key: Key{Group: "g", Partition: 3}, Records: eff.Records})
	require.NoError(f, err)
	f.Add(p)
	f.Add(frameBytes(p))
	f.Add(append(frameBytes(p), frameBytes(p)[:11]...))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fr := range parseFrames(1, b) {
			require.LessOrEqual(t, fr.end, int64(len(b)))
			_, _ = decodeFrame(fr.payload)
		}
		batch, err := decodeFrame(b)
		if err != nil {
			return
		}
		again := []byte{frameVersion}
		for _, pr := range batch {
			again, err = appendEntry(again, pr)
			require.NoError(t, err)
		}
		batch2, err := decodeFrame(again)
		require.NoError(t, err)
		require.Equal(t, batch, batch2)
	})
}
