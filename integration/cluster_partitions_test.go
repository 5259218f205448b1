package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterCreatePartitions: CreatePartitions on a three-broker
// cluster goes through the metadata log: the topic grows from 2 to 4
// RF 3 partitions on every broker, the new ones get leaders and take
// acks=all produces, shrinking or asking for the count it has is
// INVALID_PARTITIONS, and a broker restarted afterwards serves all four
// partitions.
func TestClusterCreatePartitions(t *testing.T) {
	if len(externalSeeds()) > 0 {
		t.Skipf("runs its own shoal binaries; %s is set", seedsEnv)
	}
	children := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seeds := seedsOf(children)
	adm := kadm.NewClient(newClusterClient(t, seeds))
	const topic = "grow"
	createClusterTopic(t, ctx, adm, topic, 2, 3)
	newProducer := func() *kgo.Client {
		return newClusterClient(t, seeds, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	prod := newProducer()
	produce := func(p int32, n int) {
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
		}
		require.NoError(t, prod.ProduceSync(ctx, rs...).FirstErr(), "partition %d", p)
	}
	produce(0, 50)
	produce(1, 50)

	// Shrinking is refused.
	resp, err := adm.UpdatePartitions(ctx, 1, topic)
	require.NoError(t, err)
	r, _ := resp.On(topic, nil)
	require.ErrorIs(t, r.Err, kerr.InvalidPartitions)

	// Grow to four.
	resp, err = adm.UpdatePartitions(ctx, 4, topic)
	require.NoError(t, err)
	r, _ = resp.On(topic, nil)
	require.NoError(t, r.Err, r.ErrMessage)
	again, err := adm.UpdatePartitions(ctx, 4, topic)
	require.NoError(t, err)
	r, _ = again.On(topic, nil)
	require.ErrorIs(t, r.Err, kerr.InvalidPartitions)

	// Every broker's metadata: four partitions, each with three replicas
	// and a leader.
	for _, c := range children {
		cl := kadm.NewClient(newClusterClient(t, []string{c.addr}))
		require.Eventually(t, func() bool {
			md, err := cl.Metadata(ctx, topic)
			if err != nil {
				return false
			}
			td := md.Topics[topic]
			if td.Err != nil || len(td.Partitions) != 4 {
				return false
			}
			for _, p := range td.Partitions {
				if p.Err != nil || p.Leader < 0 || len(p.Replicas) != 3 {
					return false
				}
			}
			return true
		}, 30*time.Second, 200*time.Millisecond, "broker %d does not show four led partitions", c.id)
	}
	prod = newProducer() // a client that knows of the new partitions (franz-go's manual partitioner checks its metadata)
	produce(2, 50)
	produce(3, 50)

	// A broker restarted afterwards replays the growth.
	children[1].kill()
	children[1].start()
	cl := kadm.NewClient(newClusterClient(t, []string{children[1].addr}))
	require.Eventually(t, func() bool {
		md, err := cl.Metadata(ctx, topic)
		return err == nil && md.Topics[topic].Err == nil && len(md.Topics[topic].Partitions) == 4
	}, 30*time.Second, 200*time.Millisecond, "the restarted broker lost the added partitions")
	produce(3, 50)

	cons := newClusterClient(t, seeds, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int32]int{}
	for total := 0; total < 250; {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %v", got)
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition]++; total++ })
	}
	require.Equal(t, map[int32]int{0: 50, 1: 50, 2: 50, 3: 100}, got)
}
