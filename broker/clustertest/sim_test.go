package clustertest

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/replica"
)

var (
	seeds = flag.Int("sim.seeds", 0, "seeds per profile (0: the short profile's count)")
	from  = flag.Uint64("sim.seed", 1, "first seed")
)

func TestMain(m *testing.M) {
	replica.SetRaftLogger(zap.NewNop())
	os.Exit(m.Run())
}

// TestSimulator runs the simulator's fault profiles over many seeds; a
// failure names its seed, and -sim.seed=N -sim.seeds=1 -v replays it
// with its trace.
func TestSimulator(t *testing.T) {
	profiles := []struct {
		name string
		opt  Options
	}{
		{"calm", Options{Steps: 400, Writes: 100000, Delay: 1}},
		{"lossy", Options{Steps: 800, Writes: 100000, Drop: 0.1, Dup: 0.05, Delay: 3}},
		{"partitions", Options{Steps: 1500, Writes: 100000, Drop: 0.02, Delay: 2, Split: 0.01}},
		{"power loss", Options{Steps: 1500, Writes: 100000, Drop: 0.02, Delay: 2, Crash: 0.01}},
		{"retention", Options{Steps: 1500, Writes: 100000, Drop: 0.02, Delay: 2, Crash: 0.01, Split: 0.005, Retention: 0.05}},
		{"everything", Options{Steps: 2000, Writes: 100000, Drop: 0.05, Dup: 0.05, Delay: 3, Crash: 0.005, Split: 0.005, Retention: 0.02, Nodes: 5}},
	}
	n := *seeds
	if n == 0 {
		n = 20
		if testing.Short() {
			n = 5
		}
	}
	for _, pr := range profiles {
		t.Run(pr.name, func(t *testing.T) {
			var total Stats
			for seed := *from; seed < *from+uint64(n); seed++ {
				opt := pr.opt
				opt.Seed = seed
				errs, trace, stats := Run(opt)
				total.Acked += stats.Acked
				total.Terms += stats.Terms
				total.Crashes += stats.Crashes
				total.Snapshots += stats.Snapshots
				if len(errs) > 0 {
					if testing.Verbose() || n == 1 {
						t.Log(strings.Join(trace, "\n"))
					}
					t.Fatalf("%s: %v", pr.name, errs)
				}
			}
			t.Logf("%d seeds: %d batches acknowledged, %d terms with a leader, %d power losses, %d snapshots installed",
				n, total.Acked, total.Terms, total.Crashes, total.Snapshots)
		})
	}
}

// TestSimulatorReplays: a seed replays exactly (the trace is the same).
func TestSimulatorReplays(t *testing.T) {
	opt := Options{Seed: 7, Steps: 1500, Writes: 100000, Drop: 0.05, Dup: 0.05, Delay: 3, Crash: 0.01, Split: 0.01}
	_, a, _ := Run(opt)
	_, b, _ := Run(opt)
	require.Equal(t, a, b)
}
