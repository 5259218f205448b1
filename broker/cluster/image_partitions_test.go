package cluster

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A create_partitions record appends placed partitions to a topic if its
// count is still the one they were placed after; a retried one answers
// as the first did; the topic record is replaced, never changed in place.
func TestImageCreatePartitions(t *testing.T) {
	im := newImage()
	rec := func(r record) []byte {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		return b
	}
	for id := uint64(1); id <= 3; id++ {
		out, _, _, _ := im.apply(id, rec(record{Op: "register", Broker: &Broker{ID: id, Host: "127.0.0.1", Port: 9092}}))
		require.Empty(t, out)
	}
	out, created, _, _ := im.apply(10, rec(record{Op: "create_topic", Topic: &Topic{Name: "t", Partitions: [][]uint64{{1, 2, 3}, {2, 3, 1}}}}))
	require.Empty(t, out)
	before := created

	out, _, _, _ = im.apply(13, rec(record{Op: "create_partitions", Request: "a", Topic: &Topic{Name: "t", Partitions: [][]uint64{{3, 1, 2}}}, Expect: 1}))
	require.Equal(t, errPartitionsConflict, out)
	out, _, _, _ = im.apply(3, rec(record{Op: "create_partitions", Topic: &Topic{Name: "nope", Partitions: [][]uint64{{3, 1, 2}}}, Expect: 2}))
	require.Equal(t, errUnknownTopic, out)
	out, _, _, _ = im.apply(4, rec(record{Op: "create_partitions", Topic: &Topic{Name: "t"}, Expect: 2}))
	require.Equal(t, errBadRecord, out)

	// A replica list naming an unknown broker, a broker twice, or of
	// another length than the topic's is refused.
	for _, bad := range [][]uint64{{1, 2, 9}, {1, 1, 2}, {1, 2}} {
		out, _, _, _ = im.apply(11, rec(record{Op: "create_partitions", Topic: &Topic{Name: "t", Partitions: [][]uint64{bad}}, Expect: 2}))
		require.Equal(t, errBadRecord, out, "%v", bad)
	}
	out, grown, _, _ := im.apply(12, rec(record{Op: "create_partitions", Request: "b", Topic: &Topic{Name: "t", Partitions: [][]uint64{{3, 1, 2}, {1, 2, 3}}}, Expect: 2}))
	require.Empty(t, out)
	require.Len(t, grown.Partitions, 4)
	require.Len(t, before.Partitions, 2, "the earlier topic record was changed in place")
	require.Equal(t, []uint64{3, 1, 2}, im.Topics["t"].Partitions[2])
	// The same request again (a retried proposal): the first outcome, no change.
	out, again, _, _ := im.apply(6, rec(record{Op: "create_partitions", Request: "b", Topic: &Topic{Name: "t", Partitions: [][]uint64{{3, 1, 2}, {1, 2, 3}}}, Expect: 2}))
	require.Empty(t, out)
	require.Nil(t, again)
	require.Len(t, im.Topics["t"].Partitions, 4)
}
