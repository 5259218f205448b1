package integration

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/integration/faultproxy"
)

// TestClusterNemesis is criterion C5 of the cluster design: three broker
// processes whose peer links each go through a faultproxy.Link (one per
// direction), four idempotent franz-go producers on six partitions, and
// rounds of network faults: a leader isolated (its links stalled, as a
// lost route under live TCP connections), a minority split off (its
// links cut), a bridge (two brokers that reach each other only through
// the third, one of them a leader), a leader paused 5 s (SIGSTOP), and
// flapping links (random links stalled, cut and restored every 100–400
// ms). After each, every partition must take a produce again; at the
// end every acknowledged record is read back once, in order, at its
// offset, and the replicas are identical. Clients reach the brokers
// directly: only the brokers' raft traffic is faulted.
//
// CLUSTER_NEMESIS_ROUNDS (default 1) is the number of rounds of the five
// faults; scripts/nemesis.sh runs the long profile. NEMESIS_SEED replays
// a run's choices of victims and flaps.
func TestClusterNemesis(t *testing.T) {
	rounds := envInt(t, "CLUSTER_NEMESIS_ROUNDS", 1)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("NEMESIS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = n
	}
	t.Logf("NEMESIS_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x6e656d))

	links := map[[2]int]*faultproxy.Link{} // [from, to] broker ids
	children := startClusterWith(t, 3, func(from, to *clusterChild) string {
		l, err := faultproxy.NewLink(to.peer)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		links[[2]int{from.id, to.id}] = l
		return l.Addr()
	})
	set := func(m faultproxy.LinkMode, match func(from, to int) bool) {
		for k, l := range links {
			if match(k[0], k[1]) {
				l.Set(m)
			}
		}
	}
	healAll := func() { set(faultproxy.LinkUp, func(int, int) bool { return true }) }
	touches := func(v int) func(int, int) bool { return func(f, to int) bool { return f == v || to == v } }

	seeds := seedsOf(children)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*3*time.Minute+2*time.Minute)
	defer cancel()
	adm, lp, probe := startLoop(t, ctx, seeds, "nemesis")
	epochs := func() []int32 {
		for {
			md, err := adm.Metadata(ctx, "nemesis")
			require.NoError(t, ctx.Err())
			if err == nil && len(md.Topics["nemesis"].Partitions) == 6 {
				var es []int32
				for part := range int32(6) {
					es = append(es, md.Topics["nemesis"].Partitions[part].LeaderEpoch)
				}
				if slices.Min(es) > 0 {
					return es
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	before := epochs()

	// leader returns the leader of a random partition, or (one time in
	// three) the metadata group's.
	leader := func() int {
		for {
			md, err := adm.Metadata(ctx, "nemesis")
			require.NoError(t, ctx.Err())
			if err == nil {
				if rng.IntN(3) == 0 && md.Controller > 0 {
					return int(md.Controller)
				}
				if l := md.Topics["nemesis"].Partitions[int32(rng.IntN(6))].Leader; l > 0 {
					return int(l)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	others := func(v int) (a, b int) {
		var o []int
		for id := 1; id <= 3; id++ {
			if id != v {
				o = append(o, id)
			}
		}
		return o[0], o[1]
	}

	var recovery []time.Duration
	for round := range rounds {
		for _, fault := range []string{"isolate", "split", "bridge", "pause", "flap"} {
			time.Sleep(time.Second)
			v := leader()
			switch fault {
			case "isolate": // the leader loses every peer; clients still reach it
				set(faultproxy.LinkStalled, touches(v))
				time.Sleep(4 * time.Second)
			case "split": // one broker (a minority of three) cut off
				v = 1 + rng.IntN(3)
				set(faultproxy.LinkCut, touches(v))
				time.Sleep(4 * time.Second)
			case "bridge": // v and a reach each other only through b
				a, _ := others(v)
				set(faultproxy.LinkCut, func(f, to int) bool { return f == v && to == a || f == a && to == v })
				time.Sleep(4 * time.Second)
			case "pause":
				c := children[v-1]
				require.NoError(t, c.cmd.Process.Signal(syscall.SIGSTOP))
				time.Sleep(5 * time.Second)
				require.NoError(t, c.cmd.Process.Signal(syscall.SIGCONT))
			case "flap":
				keys := make([][2]int, 0, len(links))
				for k := range links {
					keys = append(keys, k)
				}
				slices.SortFunc(keys, func(x, y [2]int) int { return (x[0]*10 + x[1]) - (y[0]*10 + y[1]) })
				for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
					links[keys[rng.IntN(len(keys))]].Set(faultproxy.LinkMode(rng.IntN(3)))
					time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
				}
			}
			healAll()
			healed := time.Now()
			for part := range int32(6) {
				probePartition(t, ctx, probe, "nemesis", part)
			}
			recovery = append(recovery, time.Since(healed))
			t.Logf("round %d: %s (broker %d), every partition took a produce %v after the heal", round+1, fault, v,
				recovery[len(recovery)-1].Round(time.Millisecond))
		}
	}
	// The faults bit: some partition's leader changed.
	after := epochs()
	t.Logf("leader epochs before the faults: %v, after: %v", before, after)
	changed := false
	for i := range after {
		changed = changed || after[i] > before[i]
	}
	require.True(t, changed, "no partition changed leader: the faults did not reach raft")
	total := lp.finish(t)
	slices.Sort(recovery)
	t.Logf("%d faults, %d records acknowledged; heal to every partition producing: p50 %v, max %v", len(recovery), total,
		recovery[len(recovery)/2].Round(time.Millisecond), recovery[len(recovery)-1].Round(time.Millisecond))
	verifyLoop(t, ctx, seeds, "nemesis", lp.acked, total)
	time.Sleep(2 * time.Second) // followers catch up
	verifyReplicas(t, children, "nemesis", 6)
}
