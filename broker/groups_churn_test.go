package broker

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupChurn: 4 member slots keep joining and leaving a group while
// it consumes churnRecords records with commits; once everything was
// seen, the members stay until the group settles. Every record must have
// been processed at least once and the committed offsets must equal the
// log end. (Each member lives 150-600 ms from its first records: with a
// fixed life from its join, a CPU-starved run spent whole lives
// rebalancing, and once fell short after 90 s.)
func TestGroupChurn(t *testing.T) {
	t.Parallel()
	n := churnRecords
	b := startGroupTest(t)
	produceN(t, b, "churn", 8, n)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Polls of at most perPoll records, each followed by a 10 ms pause:
	// four members take at least n/(4*perPoll)*10 ms (1.5-2 s) to see
	// everything, longer than any member's life, so members come and
	// go while records remain (with 250 per poll and 30,000 records, as
	// under -race, a quick run once saw everything in the first lives).
	perPoll := min(250, n/600)
	seen := make([]atomic.Bool, n)
	var count atomic.Int64
	var settle atomic.Bool // set once every record was seen: stop leaving
	var stop atomic.Bool
	var joins atomic.Int64
	var wg sync.WaitGroup
	for slot := 0; slot < 4; slot++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && ctx.Err() == nil {
				cl, err := kgo.NewClient(
					kgo.SeedBrokers(b.Addr()),
					kgo.ConsumerGroup("churn-group"),
					kgo.ConsumeTopics("churn"),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
					kgo.DisableAutoCommit(),
					kgo.SessionTimeout(6*time.Second),
					kgo.HeartbeatInterval(100*time.Millisecond),
					kgo.FetchMaxBytes(64<<10),
					kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
						cl.CommitUncommittedOffsets(ctx)
					}),
				)
				if err != nil {
					t.Error(err)
					return
				}
				joins.Add(1)
				// A member's life (150-600 ms) starts with its first
				// records, so each join makes progress however long the
				// rebalance took on a starved machine.
				var life time.Time
				for !stop.Load() && ctx.Err() == nil && (settle.Load() || life.IsZero() || time.Now().Before(life)) {
					pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
					fs := cl.PollRecords(pctx, perPoll)
					pcancel()
					if !settle.Load() {
						time.Sleep(10 * time.Millisecond)
					}
					if life.IsZero() && fs.NumRecords() > 0 {
						life = time.Now().Add(time.Duration(150+rand.IntN(450)) * time.Millisecond)
					}
					fs.EachRecord(func(r *kgo.Record) {
						i, err := strconv.Atoi(string(r.Value))
						if err == nil && i >= 0 && i < n && !seen[i].Swap(true) {
							count.Add(1)
						}
					})
					cl.CommitUncommittedOffsets(ctx)
				}
				cl.CommitUncommittedOffsets(ctx)
				cl.Close() // leaves the group
			}
		}()
	}
	adm := kadm.NewClient(newClient(t, b))
	for {
		if count.Load() >= int64(n) {
			settle.Store(true)
			if committedAtEnd(ctx, adm, "churn-group", "churn") {
				break
			}
		}
		select {
		case <-ctx.Done():
			stop.Store(true)
			wg.Wait()
			t.Fatalf("processed %d of %d records after %d joins", count.Load(), n, joins.Load())
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop.Store(true)
	wg.Wait()
	require.Equal(t, int64(n), count.Load())
	requireCommittedAtEnd(t, b, "churn-group", "churn")
	t.Logf("%d records, %d member joins", n, joins.Load())
	require.Greater(t, joins.Load(), int64(4), "members churned")
}
