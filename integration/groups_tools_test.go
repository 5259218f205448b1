package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKcatGroup: librdkafka's balanced consumer (kcat -G, the classic
// group protocol with auto-commit) reads everything produced to a
// three-partition topic and commits on exit; the committed offsets
// (kadm FetchOffsets) equal the end offsets. A second run of the same
// group resumes from them and reads only what was produced since.
func TestKcatGroup(t *testing.T) {
	t.Parallel()
	kcat := requireTool(t, "kcat")
	b := startBroker(t)
	ctx := testContext(t)
	adm := b.admin(t)
	if !b.External {
		noRebalanceDelay(ctx, t, adm) // twice per run of this test otherwise
	}
	const partitions = 3
	topic := b.createTopic(t, partitions, nil)
	group := "kcat-group-" + topic
	brokers := strings.Join(b.Seeds, ",")
	prod := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))

	produced := map[string]bool{}
	produce := func(from, n int) {
		t.Helper()
		var rs []*kgo.Record
		for i := from; i < from+n; i++ {
			v := fmt.Sprintf("kcat-group-value-%d", i)
			produced[v] = false
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(v)})
		}
		require.NoError(t, prod.ProduceSync(ctx, rs...).FirstErr())
	}
	// consume runs kcat -G until every assigned partition reaches its end
	// and returns what it printed, checking each line against what was
	// produced and not yet consumed.
	consume := func(wantAtLeast map[int32]int64) int {
		t.Helper()
		out := run(t, ctx, "", kcat, "-b", brokers, "-G", group,
			"-X", "auto.offset.reset=earliest", "-X", "client.id=shoal-kcat-group",
			"-e", "-q", "-f", "%p|%o|%s\n", topic)
		n := 0
		for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			if line == "" {
				continue
			}
			f := strings.SplitN(line, "|", 3)
			require.Len(t, f, 3, "kcat line %q", line)
			p, err := strconv.Atoi(f[0])
			require.NoError(t, err, "line %q", line)
			o, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err, "line %q", line)
			require.GreaterOrEqual(t, o, wantAtLeast[int32(p)], "kcat read %d/%d, below the committed offset: %q", p, o, line)
			seen, ok := produced[f[2]]
			require.True(t, ok, "kcat printed a value never produced: %q", line)
			require.False(t, seen, "kcat printed %q twice (or again in the second run)", f[2])
			produced[f[2]] = true
			n++
		}
		for v, seen := range produced {
			require.True(t, seen, "kcat -G did not consume %q; output:\n%s", v, out)
		}
		return n
	}
	// committedAtEnd checks the group's committed offsets against the end
	// offsets and returns them.
	committedAtEnd := func() map[int32]int64 {
		t.Helper()
		ends, err := adm.ListEndOffsets(ctx, topic)
		require.NoError(t, err)
		require.NoError(t, ends.Error())
		committed, err := adm.FetchOffsets(ctx, group)
		require.NoError(t, err)
		require.NoError(t, committed.Error())
		out := map[int32]int64{}
		for p := range int32(partitions) {
			end, ok := ends.Lookup(topic, p)
			require.True(t, ok, "no end offset for partition %d", p)
			c, ok := committed.Lookup(topic, p)
			require.True(t, ok, "no committed offset for %s/%d", topic, p)
			require.NoError(t, c.Err)
			require.Equal(t, end.Offset, c.At, "committed offset of partition %d", p)
			out[p] = c.At
		}
		return out
	}

	produce(0, 30)
	require.Equal(t, 30, consume(nil))
	firstEnds := committedAtEnd()
	require.Equal(t, map[int32]int64{0: 10, 1: 10, 2: 10}, firstEnds)

	// The group is empty again, and a second member resumes where the
	// first left off.
	described, err := adm.DescribeGroups(ctx, group)
	require.NoError(t, err)
	require.NoError(t, described.Error())
	require.Equal(t, "Empty", described[group].State)
	require.Equal(t, "consumer", described[group].ProtocolType)

	produce(30, 12)
	require.Equal(t, 12, consume(firstEnds))
	require.Equal(t, map[int32]int64{0: 14, 1: 14, 2: 14}, committedAtEnd())

	// Nothing left: a third run reads nothing and commits nothing new.
	require.Equal(t, 0, consume(map[int32]int64{0: 14, 1: 14, 2: 14}))
	require.Equal(t, map[int32]int64{0: 14, 1: 14, 2: 14}, committedAtEnd())
}
