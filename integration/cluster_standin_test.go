package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterMetadataNamesALeader: a new topic's partitions whose
// preferred replica is down have no leader until the others' election
// timeout; meanwhile Metadata names one of their replicas, never a
// leader of -1, so kafka-go's Writer, which fails a write to a leader
// of -1 at once ("topic partition has no leader"), writes to every
// partition right after CreateTopics, retrying the stand-in's
// NOT_LEADER_OR_FOLLOWER as it retries any.
func TestClusterMetadataNamesALeader(t *testing.T) {
	children := startCluster(t, 3)
	seeds := seedsOf(children)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClusterClient(t, seeds, kgo.MetadataMinAge(50*time.Millisecond)))
	createTopic := func(name string, partitions int32) {
		for {
			resp, err := adm.CreateTopic(ctx, partitions, 3, nil, name)
			if err == nil && resp.Err == nil {
				return
			}
			require.NoError(t, ctx.Err(), "topic never created: %v %v", err, resp.Err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	createTopic("warm", 1) // every broker registered
	children[2].kill()
	createTopic("standin", 6)
	// Known on both live brokers first: kafka-go's Writer also fails a
	// write at once on a topic its first metadata did not list, as a
	// broker that has not applied the creation yet answers (Kafka's
	// brokers, too, learn of a topic after CreateTopics returns).
	for _, c := range children[:2] {
		one := kadm.NewClient(newClusterClient(t, []string{c.addr}, kgo.MetadataMinAge(10*time.Millisecond)))
		require.Eventually(t, func() bool {
			md, err := one.Metadata(ctx, "standin")
			return err == nil && md.Topics["standin"].Err == nil && len(md.Topics["standin"].Partitions) == 6
		}, time.Minute, 5*time.Millisecond, "broker %d never listed the topic", c.id)
	}

	const n = 12
	wrote := make(chan error, 1)
	go func() {
		w := &kafka.Writer{Addr: kafka.TCP(seeds[:2]...), Topic: "standin", Balancer: &kafka.RoundRobin{},
			RequiredAcks: kafka.RequireAll, MaxAttempts: 100, BatchTimeout: time.Millisecond,
			WriteBackoffMin: 50 * time.Millisecond, WriteBackoffMax: 200 * time.Millisecond,
			Transport: &kafka.Transport{MetadataTTL: 200 * time.Millisecond}}
		defer w.Close()
		var msgs []kafka.Message
		for i := range n {
			msgs = append(msgs, kafka.Message{Value: fmt.Appendf(nil, "v%d", i)})
		}
		wrote <- w.WriteMessages(ctx, msgs...)
	}()

	// Until every partition has its elected leader, each live broker
	// names a replica as leader of each.
	standIns := 0
	for _, c := range children[:2] {
		one := kadm.NewClient(newClusterClient(t, []string{c.addr}, kgo.MetadataMinAge(10*time.Millisecond)))
		for elected := false; !elected; {
			md, err := one.Metadata(ctx, "standin")
			require.NoError(t, err)
			ps := md.Topics["standin"].Partitions
			elected = len(ps) == 6 // not yet known here, else all six
			for _, p := range ps {
				require.True(t, slices.Contains(p.Replicas, p.Leader), "broker %d names leader %d of partition %d, replicas %v",
					c.id, p.Leader, p.Partition, p.Replicas)
				if p.LeaderEpoch < 1 {
					elected = false
					standIns++
				}
			}
			require.NoError(t, ctx.Err())
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("%d stand-in leaders seen before every partition had its own", standIns)
	require.NoError(t, <-wrote, "kafka-go")

	cl := newClusterClient(t, seeds[:2], kgo.ConsumeTopics("standin"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got int
	for got < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		got += fs.NumRecords()
	}
	require.Equal(t, n, got)
}
