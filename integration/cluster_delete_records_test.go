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

// TestClusterDeleteRecords: DeleteRecords (kadm) on an RF 3 partition of
// a three-broker cluster moves every replica's log start offset: with
// the leader SIGKILLed afterwards, the new leader's earliest offset is
// still the cut, and a consumer from the start reads only the records
// after it; so does the old leader once restarted and leading again.
func TestClusterDeleteRecords(t *testing.T) {
	if len(externalSeeds()) > 0 {
		t.Skipf("runs its own shoal binaries; %s is set", seedsEnv)
	}
	children := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seeds := seedsOf(children)
	adm := kadm.NewClient(newClusterClient(t, seeds))
	const topic = "trimmed"
	createClusterTopic(t, ctx, adm, topic, 1, 3)
	// Kafka's metadata topic is refused here too (its partition 0 would
	// be the metadata group).
	reserved, err := adm.CreateTopic(ctx, 1, 3, nil, "__cluster_metadata")
	require.ErrorIs(t, err, kerr.InvalidRequest)
	require.Equal(t, "Creation of internal topic __cluster_metadata is prohibited.", reserved.ErrMessage)
	prod := newClusterClient(t, seeds, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	var last *kgo.Record
	for i := range 50 {
		r := &kgo.Record{Value: fmt.Appendf(nil, "r-%d", i)}
		require.NoError(t, prod.ProduceSync(ctx, r).FirstErr())
		if i == 29 {
			last = r // the cut: records before it go
		}
	}
	cut := last.Offset
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: cut})
	var low int64
	require.Eventually(t, func() bool {
		resp, err := adm.DeleteRecords(ctx, offs)
		if err != nil {
			return false
		}
		r, ok := resp.Lookup(topic, 0)
		low = r.LowWatermark
		return ok && r.Err == nil
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, cut, low)

	earliest := func() (int64, error) {
		l, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return -1, err
		}
		o, ok := l.Lookup(topic, 0)
		if !ok {
			return -1, fmt.Errorf("no answer")
		}
		return o.Offset, o.Err
	}
	readFromStart := func() string {
		cl := newClusterClient(t, seeds, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err())
		return string(fs.Records()[0].Value)
	}

	md, err := adm.Metadata(ctx, topic)
	require.NoError(t, err)
	leader := md.Topics[topic].Partitions[0].Leader
	var lc *clusterChild
	for _, c := range children {
		if int32(c.id) == leader {
			lc = c
		}
	}
	require.NotNil(t, lc)
	lc.kill()
	require.Eventually(t, func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		p := md.Topics[topic].Partitions[0]
		return p.Err == nil && p.Leader > 0 && p.Leader != leader
	}, 30*time.Second, 100*time.Millisecond, "no new leader")
	var got int64
	require.Eventually(t, func() bool {
		var err error
		got, err = earliest()
		return err == nil || !errorsIsRetriable(err)
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, cut, got, "the new leader's earliest offset")
	require.Equal(t, "r-29", readFromStart())

	// The old leader, back (it applies the entry again at its restart):
	// the records stay deleted whichever broker leads.
	lc.start()
	require.Eventually(t, func() bool {
		for _, c := range children {
			cl := kadm.NewClient(newClusterClient(t, []string{c.addr}))
			md, err := cl.Metadata(ctx, topic)
			if err != nil || md.Topics[topic].Partitions[0].Leader <= 0 {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond)
	require.Equal(t, "r-29", readFromStart())
}

// errorsIsRetriable reports whether a Kafka error is one a client retries.
func errorsIsRetriable(err error) bool {
	return kerr.IsRetriable(err)
}
