package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterLeaderStability is criterion C8 of the cluster issue: no
// leader changes under saturating produce. Three broker processes, six
// RF 3 partitions, four idempotent acks=all producers of 1 KiB records writing as fast as
// the brokers take it (each keeps franz-go's buffer full) for
// CLUSTER_STABILITY_SECONDS (10 in CI; scripts/stability.sh runs 60).
// Afterwards every partition still has its leader and leader epoch of
// before, the metadata leader has not moved, and no broker logged an
// election won (partition groups and the metadata group) during the
// window.
func TestClusterLeaderStability(t *testing.T) {
	seconds := envInt(t, "CLUSTER_STABILITY_SECONDS", 10)
	children := startCluster(t, 3)
	seeds := seedsOf(children)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second+3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClusterClient(t, seeds, kgo.MetadataMinAge(50*time.Millisecond)))
	const topic = "stable"
	// Bounded retention, so the long profile's replicas (about 200 MB/s
	// each) fit on the disk: each replica deletes its old segments as it
	// goes, under the load.
	configs := map[string]*string{"segment.bytes": kadm.StringPtr("16777216"), "retention.bytes": kadm.StringPtr("67108864")}
	for {
		resp, err := adm.CreateTopic(ctx, 6, -1, configs, topic)
		if err == nil && resp.Err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "topic never created: %v %v", err, resp.Err)
		time.Sleep(200 * time.Millisecond)
	}
	probe := newClusterClient(t, seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100*time.Millisecond))
	for part := range int32(6) {
		probePartition(t, ctx, probe, topic, part)
	}

	// leaders is every partition's leader and epoch, and the metadata
	// leader (the controller DescribeCluster names), once every
	// partition reports a leader.
	type lead struct{ leader, epoch int32 }
	leaders := func() (map[int32]lead, int32) {
		for {
			md, err := adm.Metadata(ctx, topic)
			require.NoError(t, ctx.Err())
			if err == nil && md.Topics[topic].Err == nil && len(md.Topics[topic].Partitions) == 6 {
				m := map[int32]lead{}
				for _, p := range md.Topics[topic].Partitions {
					if p.Leader >= 0 {
						m[p.Partition] = lead{p.Leader, p.LeaderEpoch}
					}
				}
				if len(m) == 6 && md.Controller > 0 {
					return m, md.Controller
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	before, controller := leaders()
	// Each partition's and the metadata group's first election is in
	// the logs already: the lines the window must not add.
	marks := make([]int64, len(children))
	logged := 0
	for i, c := range children {
		b, err := os.ReadFile(c.logf)
		require.NoError(t, err)
		marks[i] = int64(len(b))
		logged += strings.Count(string(b), "elected leader")
	}
	require.GreaterOrEqual(t, logged, 7, "elections logged before the window")

	// Poll the controller through the window too: a metadata leader
	// that moves and comes back is a change as well (the log catches
	// the rest).
	var moved atomic.Int32
	stopPoll := make(chan struct{})
	var pollWG sync.WaitGroup
	pollWG.Add(1)
	go func() {
		defer pollWG.Done()
		for {
			select {
			case <-stopPoll:
				return
			case <-time.After(250 * time.Millisecond):
			}
			if md, err := adm.BrokerMetadata(ctx); err == nil && md.Controller > 0 && md.Controller != controller {
				moved.Store(md.Controller)
			}
		}
	}()

	const producers = 4
	var acked, failed atomic.Int64
	var firstErr atomic.Value
	// Random values: franz-go compresses batches (snappy), and zeros
	// would write next to nothing.
	pool := make([]byte, 1<<20)
	_, _ = rand.Read(pool)
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	for p := range producers {
		cl := newClusterClient(t, seeds, kgo.ProducerLinger(5*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(deadline); n++ {
				r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%d-%d", p, n), Value: pool[(n*1024)%(len(pool)-1024):][:1024]}
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
						return
					}
					acked.Add(1)
				})
			}
			require.NoError(t, cl.Flush(ctx))
		}()
	}
	wg.Wait()
	close(stopPoll)
	pollWG.Wait()

	after, controllerAfter := leaders()
	var elections []string
	for i, c := range children {
		b, err := os.ReadFile(c.logf)
		require.NoError(t, err)
		for _, line := range strings.Split(string(b[marks[i]:]), "\n") {
			if strings.Contains(line, "elected leader") {
				elections = append(elections, fmt.Sprintf("broker %d: %s", c.id, line))
			}
		}
	}
	rate := float64(acked.Load()) / float64(seconds)
	t.Logf("%d s of saturating produce: %d records acknowledged (%.0f/s), %d failed; leaders before %v, after %v; controller %d, %d",
		seconds, acked.Load(), rate, failed.Load(), before, after, controller, controllerAfter)
	require.Zero(t, failed.Load(), "produce errors: first %v", firstErr.Load())
	require.Greater(t, acked.Load(), int64(0))
	require.Empty(t, elections, "elections during saturating produce")
	require.Equal(t, before, after, "partition leaders or epochs changed")
	require.Equal(t, controller, controllerAfter, "the metadata leader changed")
	require.Zero(t, moved.Load(), "the metadata leader moved during the window")
}
