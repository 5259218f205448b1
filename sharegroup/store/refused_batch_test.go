package store

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
)

// TestSubmitRefusedBatchMarksEveryKey: a write of share-partitions a
// and b is refused at Submit because a write of a failed (a is marked
// failed). Nothing of b's records is stored, and b must be marked failed
// too: else a later write of b made from the same in-memory state (the
// lock timer's expiry write, fire(), which does not go through
// prepareLocked) would be applied, and b's refused acceptance would end
// up durable through that delta's SPSO, half of a failed all-or-nothing
// acknowledgement. (Found by a review; commitLoop marked every key of a
// write it refused, Submit only the one that made it refuse.)
func TestSubmitRefusedBatchMarksEveryKey(t *testing.T) {
	t.Parallel()
	g, s := gatedStore(t)
	a, b, pa, pb := twoPartitions(t, s)

	// A write of a fails (nothing chained behind it yet): a is marked.
	w0 := g.hold(t, s, []PartitionRecords{{Key: a, Records: ackRange(t, pa, 0, 4)}})
	g.release <- errors.New("injected")
	require.Error(t, w0.Wait())

	// One acknowledgement of a and b (broker acknowledge: one Submit).
	// b: accept 0..4 while 5..9 stay acquired by m.
	_, eff := pb.Acquire(at(1), "m", []sharegroup.LogBatch{{First: 0, Last: 9}}, 10, sharegroup.RecordLimit)
	require.Empty(t, eff.Records)
	effB, err := pb.Acknowledge(at(2), "m", []sharegroup.AckBatch{{First: 0, Last: 4, Types: []sharegroup.AckType{sharegroup.AckAccept}}})
	require.NoError(t, err)
	w1 := s.Submit([]PartitionRecords{
		{Key: a, Records: ackRange(t, pa, 5, 9)},
		{Key: b, Records: effB.Records},
	})
	require.ErrorIs(t, w1.Wait(), ErrEarlierWriteFailed) // refused: nothing of it written

	// b's locks on 5..9 run out (fire -> writeLocked, no prepareLocked):
	// the delta carries b's in-memory SPSO, 5.
	exp := pb.ExpireLocks(at(1000))
	require.NotEmpty(t, exp.Records)
	werr := s.Write([]PartitionRecords{{Key: b, Records: exp.Records}})

	lb, _, err := s.Load(b, sharegroup.DefaultConfig())
	require.NoError(t, err)
	require.ErrorIs(t, werr, ErrEarlierWriteFailed,
		"a write of b following its refused write was applied; stored SPSO now %d (the failed acceptance of 0..4 is durable)", lb.SPSO())
	require.Equal(t, int64(0), lb.SPSO())
}
