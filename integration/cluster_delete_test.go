package integration

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterDeleteTopic: DeleteTopics on a three-broker cluster goes
// through the metadata log. With one broker down, the topic leaves the
// live brokers' metadata and disks; created again under its name (RF 3,
// the down broker among its replicas) it starts empty. The down broker,
// back, applies the deletion and the new topic in order and ends with
// the new topic's records only, its directory claimed by the new id; a
// broker SIGKILLed and restarted afterwards keeps them; the group
// offsets committed for the old topic are gone.
func TestClusterDeleteTopic(t *testing.T) {
	if len(externalSeeds()) > 0 {
		t.Skipf("runs its own shoal binaries; %s is set", seedsEnv)
	}
	children := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seeds := seedsOf(children)
	adm := kadm.NewClient(newClusterClient(t, seeds))
	const topic, group = "doomed", "doomed-readers"
	createClusterTopic(t, ctx, adm, topic, 2, 3)
	prod := newClusterClient(t, seeds, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	produce := func(prefix string, n int) {
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
		}
		require.NoError(t, prod.ProduceSync(ctx, rs...).FirstErr())
	}
	produce("old", 40)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 7, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: topic, Partition: 1, At: 9, LeaderEpoch: -1})
	for {
		resp, err := adm.CommitOffsets(ctx, group, offs)
		if err == nil && resp.Ok() {
			break
		}
		require.NoError(t, ctx.Err(), "commit: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
	oldID := topicID(t, ctx, adm, topic)

	down := children[2]
	down.kill()
	live := newClusterClient(t, seedsOf(children[:2]))
	ladm := kadm.NewClient(live)
	resp, err := ladm.DeleteTopics(ctx, topic)
	require.NoError(t, err)
	r, err := resp.On(topic, nil)
	require.NoError(t, err)
	require.NoError(t, r.Err, r.ErrMessage)
	again, err := ladm.DeleteTopics(ctx, topic)
	require.NoError(t, err)
	r, _ = again.On(topic, nil)
	require.ErrorIs(t, r.Err, kerr.UnknownTopicOrPartition)
	for _, c := range children[:2] {
		cl := kadm.NewClient(newClusterClient(t, []string{c.addr}))
		require.Eventually(t, func() bool {
			md, err := cl.Metadata(ctx, topic)
			return err == nil && errors.Is(md.Topics[topic].Err, kerr.UnknownTopicOrPartition)
		}, 30*time.Second, 100*time.Millisecond, "broker %d still lists the topic", c.id)
		for _, p := range []string{topic + "-0", topic + "-1"} {
			// Removed off the metadata group's goroutine, a moment after.
			require.Eventually(t, func() bool {
				_, err := os.Stat(filepath.Join(c.dir, "cluster", p))
				return os.IsNotExist(err)
			}, 30*time.Second, 10*time.Millisecond, "broker %d kept %s", c.id, p)
		}
	}

	// The same name again, with the down broker among the replicas.
	for {
		cr, err := ladm.CreateTopic(ctx, 2, 3, nil, topic)
		if err == nil && cr.Err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "topic never created again: %v %v", err, cr.Err)
		time.Sleep(200 * time.Millisecond)
	}
	newID := topicID(t, ctx, ladm, topic)
	require.NotEqual(t, oldID, newID)
	prod = newClusterClient(t, seedsOf(children[:2]), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	produce("new", 10)

	down.start()
	read := func(seeds []string) []string {
		cons := newClusterClient(t, seeds, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var got []string
		for len(got) < 10 {
			fs := cons.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "read %d: %v", len(got), got)
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		cons.Close()
		return got
	}
	cl := kadm.NewClient(newClusterClient(t, []string{down.addr}))
	require.Eventually(t, func() bool {
		md, err := cl.Metadata(ctx, topic)
		return err == nil && md.Topics[topic].Err == nil && md.Topics[topic].ID == newID
	}, 60*time.Second, 200*time.Millisecond, "the returned broker never learned the new topic")
	for _, v := range read(seeds) {
		require.True(t, strings.HasPrefix(v, "new-"), "a record of the deleted topic: %s", v)
	}
	// Its replicas of the new topic catch up, in directories claimed by
	// the new id.
	require.Eventually(t, func() bool {
		for _, p := range []string{topic + "-0", topic + "-1"} {
			b, err := os.ReadFile(filepath.Join(down.dir, "cluster", p, "partition.metadata"))
			if err != nil || !strings.Contains(string(b), "topic_id: "+base64.RawURLEncoding.EncodeToString(newID[:])) {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond)

	// Every broker SIGKILLed and restarted in turn keeps the new topic.
	for _, c := range children {
		c.kill()
		c.start()
		time.Sleep(time.Second)
	}
	got := read([]string{children[0].addr})
	require.Len(t, got, 10)
	for _, v := range got {
		require.True(t, strings.HasPrefix(v, "new-"), "a record of the deleted topic: %s", v)
	}
	for {
		fo, err := adm.FetchOffsets(ctx, group)
		if err == nil && fo.Error() == nil {
			_, ok := fo.Lookup(topic, 0)
			require.False(t, ok, "the deleted topic's committed offset survived: %v", fo)
			_, ok = fo.Lookup(topic, 1)
			require.False(t, ok, "the deleted topic's committed offset survived: %v", fo)
			break
		}
		require.NoError(t, ctx.Err(), "fetch offsets: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
}

// topicID waits for the topic's id in the metadata.
func topicID(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) [16]byte {
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil && md.Topics[topic].Err == nil && md.Topics[topic].ID != ([16]byte{}) {
			return md.Topics[topic].ID
		}
		require.NoError(t, ctx.Err(), "no id for %s: %v", topic, err)
		time.Sleep(100 * time.Millisecond)
	}
}
