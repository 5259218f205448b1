package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterReplicationFactors: on three brokers, topics of
// replication factor 1 and 2 place each partition on that many
// brokers, and every broker's Metadata lists every partition with its
// replicas and leader (a broker that does not host a partition answers
// from the state its leader published). An idempotent producer and a
// consumer group given the three seeds write and read all of both
// topics, the group's offsets committed with a coordinator that hosts
// only some of the partitions; a replication factor above the broker
// count is INVALID_REPLICATION_FACTOR.
func TestClusterReplicationFactors(t *testing.T) {
	children := startCluster(t, 3)
	seeds := seedsOf(children)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClusterClient(t, seeds, kgo.MetadataMinAge(100*time.Millisecond))
	adm := kadm.NewClient(cl)
	for _, tc := range []struct {
		name string
		rf   int16
	}{{"rf1", 1}, {"rf2", 2}} {
		for {
			resp, err := adm.CreateTopic(ctx, 6, tc.rf, nil, tc.name)
			if err == nil && resp.Err == nil {
				break
			}
			require.NoError(t, ctx.Err(), "topic never created: %v %v", err, resp.Err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	resp, err := adm.CreateTopic(ctx, 1, 4, nil, "rf4")
	if err == nil {
		err = resp.Err
	}
	require.ErrorContains(t, err, "INVALID_REPLICATION_FACTOR")

	// Every broker lists every partition, its replicas and one leader
	// among them, the same on all three once leaders have published.
	for _, c := range children {
		one := kadm.NewClient(newClusterClient(t, []string{c.addr}, kgo.MetadataMinAge(100*time.Millisecond)))
		require.Eventually(t, func() bool {
			md, err := one.Metadata(ctx, "rf1", "rf2")
			if err != nil {
				return false
			}
			for name, rf := range map[string]int{"rf1": 1, "rf2": 2} {
				td := md.Topics[name]
				if td.Err != nil || len(td.Partitions) != 6 {
					return false
				}
				for _, pd := range td.Partitions {
					if pd.Err != nil || len(pd.Replicas) != rf || !slices.Contains(pd.Replicas, pd.Leader) || len(pd.ISR) != rf {
						return false
					}
				}
			}
			return true
		}, 20*time.Second, 100*time.Millisecond, "broker %d's metadata", c.id)
	}

	const n = 3000
	var rs []*kgo.Record
	for i := range n {
		for _, topic := range []string{"rf1", "rf2"} {
			rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i%17), Value: fmt.Appendf(nil, "%s/%d", topic, i)})
		}
	}
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())

	cons := newClusterClient(t, seeds, kgo.ConsumerGroup("rf-readers"), kgo.ConsumeTopics("rf1", "rf2"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	seen := map[string]bool{}
	for len(seen) < 2*n {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", len(seen), 2*n)
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			require.False(t, seen[string(r.Value)], "%s twice", r.Value)
			seen[string(r.Value)] = true
		})
	}
	require.NoError(t, cons.CommitUncommittedOffsets(ctx))
	offs, err := adm.FetchOffsets(ctx, "rf-readers")
	require.NoError(t, err)
	ends, err := adm.ListEndOffsets(ctx, "rf1", "rf2")
	require.NoError(t, err)
	ends.Each(func(lo kadm.ListedOffset) {
		require.NoError(t, lo.Err)
		o, ok := offs.Lookup(lo.Topic, lo.Partition)
		require.True(t, ok, "%s-%d has no committed offset", lo.Topic, lo.Partition)
		require.NoError(t, o.Err)
		require.Equal(t, lo.Offset, o.At, "%s-%d", lo.Topic, lo.Partition)
	})
}

// TestClusterDefaultReplicationFactorWaitsForEveryBroker: the default
// replication factor (default.replication.factor 0) is every broker of
// controller.quorum.voters, not every broker registered so far. With
// two of three brokers up, a CreateTopics asking for the default is
// INVALID_REPLICATION_FACTOR and a Metadata auto-creating a topic is
// LEADER_NOT_AVAILABLE (retriable), never a topic with fewer replicas;
// once the third broker is up, both topics get three.
func TestClusterDefaultReplicationFactorWaitsForEveryBroker(t *testing.T) {
	children := newCluster(t, 3, nil)
	children[0].start()
	children[1].start()
	seeds := []string{children[0].addr, children[1].addr}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClusterClient(t, seeds, kgo.MetadataMinAge(100*time.Millisecond))
	adm := kadm.NewClient(cl)

	// Until the metadata group has a leader the answer may be anything
	// retriable; once it has one, it is INVALID_REPLICATION_FACTOR.
	for {
		resp, err := adm.CreateTopic(ctx, 1, -1, nil, "early")
		if err == nil {
			err = resp.Err
		}
		require.Error(t, err, "a topic asking for every broker was created with two of three up")
		if errors.Is(err, kerr.InvalidReplicationFactor) {
			break
		}
		require.NoError(t, ctx.Err(), "last answer: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("auto")
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.Equal(t, kerr.LeaderNotAvailable.Code, resp.Topics[0].ErrorCode, "auto-creation with a broker missing")

	children[2].start()
	for _, name := range []string{"early", "auto"} {
		require.Eventually(t, func() bool {
			if name == "early" {
				// kadm.CreateTopic returns the topic's error as err too:
				// once one call created it (and a Metadata reached a
				// broker that had not started it yet), the next ones are
				// TOPIC_ALREADY_EXISTS.
				if _, err := adm.CreateTopic(ctx, 1, -1, nil, name); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
					return false
				}
			} else if _, err := req.RequestWith(ctx, cl); err != nil {
				return false
			}
			md, err := adm.Metadata(ctx, name)
			if err != nil || md.Topics[name].Err != nil || len(md.Topics[name].Partitions) != 1 {
				return false
			}
			return len(md.Topics[name].Partitions[0].Replicas) == 3
		}, time.Minute, 200*time.Millisecond, "%s never got three replicas", name)
	}
}
