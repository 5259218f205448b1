package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker/clustertest"
)

// TestElectUnderLoad: a preferred election under a steady produce load
// from 1, 4 and 16 producers hands leadership over in well under its
// timeout (review: a gate of "the whole log durable there" never passed
// with entries always in flight).
func TestElectUnderLoad(t *testing.T) {
	for _, k := range []int{1, 4, 16} {
		t.Run("", func(t *testing.T) {
			c, replicas := electCluster(t)
			for range 3 {
				if electUnderLoad(t, c, replicas, k) {
					return
				}
			}
			t.Fatal("in three tries the preferred replica took its leadership back before it was asked")
		})
	}
}

// electUnderLoad is one try of TestElectUnderLoad with k producers. It
// returns false, to be tried again, when the preferred replica got its
// leadership back by itself before it was asked: with the tests' 100 ms
// election timeout a machine loaded enough to delay the leader's
// heartbeats that long (-race, other tests) lets the preferred replica
// win an election of its own, and the election is then not needed.
func electUnderLoad(t *testing.T, c *testCluster, replicas [][]uint64, k int) bool {
	p0 := PartitionName("el", 0)
	pref, other := replicas[0][0], replicas[0][1]
	moveLeader(t, c, p0, other)
	leader := c.nodes[other-1]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, bad atomic.Int64
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seq int32
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := leader.Produce(ctx, p0, clustertest.Batch(seq))
				cancel()
				if err == nil {
					ok.Add(1)
					seq++
				} else {
					bad.Add(1)
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	start := time.Now()
	err := leader.ElectPreferred(ctx, []string{p0})[p0]
	cancel()
	el := time.Since(start)
	close(stop)
	wg.Wait()
	st, _, _ := c.nodes[pref-1].Group(p0)
	t.Logf("producers %d: elect err=%v after %v; preferred leads %v; produces ok %d failed %d", k, err, el, st.IsLeader, ok.Load(), bad.Load())
	if errors.Is(err, ErrElectionNotNeeded) && st.IsLeader {
		return false
	}
	require.NoError(t, err)
	require.True(t, st.IsLeader)
	return true
}

// TestISRKeptAtNewTerm: twenty leadership transfers in an idle cluster
// publish one partition state each, never an ISR shrunk to the new
// leader alone: a new term's first report keeps the ISR it was handed
// until its followers had an election timeout to answer (review: 6 or 7
// of 20 published ISRs of one).
func TestISRKeptAtNewTerm(t *testing.T) {
	c, replicas := electCluster(t)
	p0 := PartitionName("el", 0)
	pref, other := replicas[0][0], replicas[0][1]
	shrunk := map[string]int{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last PartitionState
		for {
			select {
			case <-stop:
				return
			default:
			}
			ps, ok := c.nodes[2].PartitionState(p0)
			if ok && len(ps.ISR) < 3 && !(ps.Term == last.Term && len(ps.ISR) == len(last.ISR)) {
				shrunk[fmt.Sprintf("term %d leader %d isr %v", ps.Term, ps.Leader, ps.ISR)]++
			}
			last = ps
			time.Sleep(200 * time.Microsecond)
		}
	}()
	before := c.nodes[0].Image().Applied
	for i := range 20 {
		if i%2 == 0 {
			moveLeader(t, c, p0, other)
		} else {
			moveLeader(t, c, p0, pref)
		}
	}
	close(stop)
	<-done
	records := c.nodes[0].Image().Applied - before
	t.Logf("20 transfers: %d metadata records; shrunk ISRs seen: %v", records, shrunk)
	// A follower slower to answer than an election timeout (a loaded
	// machine under -race) may still leave one now and then.
	require.LessOrEqual(t, len(shrunk), 2, "shrunk ISRs published")
	require.LessOrEqual(t, records, uint64(24))
}
