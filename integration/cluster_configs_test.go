package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterTopicConfigs: a topic's configs are the cluster's, not one
// broker's. Given at creation through one broker, every broker's
// DescribeConfigs reports them; an incremental change through another
// broker reaches all three; two brokers changing different keys of the
// same topic at once both land (neither read-modify-write loses the
// other's); a broker restarted afterwards still reports the last
// configs; and a bad value is INVALID_CONFIG, changing nothing.
func TestClusterTopicConfigs(t *testing.T) {
	children := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admins := make([]*kadm.Client, len(children))
	for i, c := range children {
		admins[i] = kadm.NewClient(newClusterClient(t, []string{c.addr}, kgo.MetadataMinAge(100*time.Millisecond)))
	}
	retention := "3600000"
	for {
		resp, err := admins[0].CreateTopic(ctx, 3, 3, map[string]*string{"retention.ms": &retention}, "cfg")
		if err == nil && resp.Err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "topic never created: %v %v", err, resp.Err)
		time.Sleep(200 * time.Millisecond)
	}

	// value returns topic cfg's config name as adm describes it, and
	// whether it is an override (DYNAMIC_TOPIC_CONFIG).
	value := func(adm *kadm.Client, name string) (string, bool) {
		rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			return fmt.Sprintf("error %v", err), false
		}
		for _, c := range rcs[0].Configs {
			if c.Key == name {
				return c.MaybeValue(), c.Source == kmsg.ConfigSourceDynamicTopicConfig
			}
		}
		return "", false
	}
	everywhere := func(name, want string) {
		t.Helper()
		for i, adm := range admins {
			require.Eventually(t, func() bool {
				v, override := value(adm, name)
				return v == want && override
			}, 10*time.Second, 50*time.Millisecond, "broker %d's %s", children[i].id, name)
		}
	}
	everywhere("retention.ms", "3600000")

	// An incremental change through broker 2.
	resps, err := admins[1].AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("2097152")}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, resps[0].Err)
	everywhere("segment.bytes", "2097152")
	everywhere("retention.ms", "3600000") // kept: the change was incremental

	// Two brokers at once, different keys: both land.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, kv := range [][2]string{{"max.message.bytes", "2000000"}, {"min.insync.replicas", "2"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := admins[i+1].AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: kv[0], Value: kadm.StringPtr(kv[1])}}, "cfg")
			if err == nil {
				err = r[0].Err
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	everywhere("max.message.bytes", "2000000")
	everywhere("min.insync.replicas", "2")

	// A bad value is refused and changes nothing.
	resps, err = admins[2].AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("soon")}}, "cfg")
	require.NoError(t, err)
	require.ErrorContains(t, resps[0].Err, "INVALID_CONFIG")
	everywhere("retention.ms", "3600000")

	// Deleting an override through broker 3; broker 1 restarted after
	// reports the configs as they are now, from the metadata log.
	resps, err = admins[2].AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, resps[0].Err)
	for i, adm := range admins {
		require.Eventually(t, func() bool {
			v, override := value(adm, "retention.ms")
			return !override && v != "3600000"
		}, 10*time.Second, 50*time.Millisecond, "broker %d's retention.ms", children[i].id)
	}
	children[0].kill()
	children[0].start()
	admins[0] = kadm.NewClient(newClusterClient(t, []string{children[0].addr}, kgo.MetadataMinAge(100*time.Millisecond)))
	everywhere("segment.bytes", "2097152")
	everywhere("min.insync.replicas", "2")

	// The replicas' logs took the config: a record over the topic's
	// max.message.bytes (2,000,000) but over the broker default (1,048,588) is
	// produced; one over it is MESSAGE_TOO_LARGE.
	cl := newClusterClient(t, seedsOf(children), kgo.ProducerBatchMaxBytes(4<<20), kgo.MaxBufferedBytes(16<<20),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	big := make([]byte, 1_500_000)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "cfg", Value: big}).FirstErr())
	huge := make([]byte, 2_100_000)
	require.ErrorContains(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "cfg", Value: huge}).FirstErr(), "MESSAGE_TOO_LARGE")
}

// TestClusterOfflineReplicas: a SIGKILLed broker is fenced once the
// metadata leader has not heard from it for broker.session.timeout.ms
// (1 s here): every surviving broker's Metadata and
// DescribeTopicPartitions report its replicas offline, DescribeCluster
// leaves it out unless asked for fenced brokers (then IsFenced); once it
// is restarted, nothing is offline.
func TestClusterOfflineReplicas(t *testing.T) {
	children := newCluster(t, 3, nil)
	for _, c := range children {
		c.extra = []string{"--broker-session-timeout", "1s"}
		c.start()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClusterClient(t, seedsOf(children), kgo.MetadataMinAge(100*time.Millisecond)))
	for {
		resp, err := adm.CreateTopic(ctx, 3, 3, nil, "off")
		if err == nil && resp.Err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "topic never created: %v %v", err, resp.Err)
		time.Sleep(200 * time.Millisecond)
	}
	victim := children[2]
	victim.kill()
	offline := func(c *clusterChild, want []int32) func() bool {
		cl := newClusterClient(t, []string{c.addr})
		return func() bool {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("off")
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
				return false
			}
			for _, p := range resp.Topics[0].Partitions {
				if !slices.Equal(p.OfflineReplicas, want) && !(len(want) == 0 && len(p.OfflineReplicas) == 0) {
					return false
				}
			}
			dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
			dt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			dt.Topic = "off"
			dreq.Topics = append(dreq.Topics, dt)
			dresp, err := dreq.RequestWith(ctx, cl)
			if err != nil || len(dresp.Topics) != 1 {
				return false
			}
			for _, p := range dresp.Topics[0].Partitions {
				if !slices.Equal(p.OfflineReplicas, want) && !(len(want) == 0 && len(p.OfflineReplicas) == 0) {
					return false
				}
			}
			return true
		}
	}
	for _, c := range children[:2] {
		require.Eventually(t, offline(c, []int32{int32(victim.id)}), 30*time.Second, 100*time.Millisecond, "broker %d", c.id)
	}
	cl := newClusterClient(t, []string{children[0].addr})
	for _, include := range []bool{false, true} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeFencedBrokers = include
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		var ids []int32
		for _, b := range resp.Brokers {
			ids = append(ids, b.NodeID)
			require.Equal(t, b.NodeID == int32(victim.id), b.IsFenced, "broker %d", b.NodeID)
		}
		if include {
			require.ElementsMatch(t, []int32{1, 2, 3}, ids)
		} else {
			require.ElementsMatch(t, []int32{1, 2}, ids)
		}
	}
	victim.start()
	for _, c := range children {
		require.Eventually(t, offline(c, nil), 30*time.Second, 100*time.Millisecond, "broker %d after the restart", c.id)
	}
}
