package sharegroup

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Random operations of every kind (mode switches, recovery, resets, log
// start moves, gaps and skipped batches, dead letters, backoff, a random
// rate limiter), the bookkeeping checked after each, and an oracle for
// every ordered acquisition: with nothing capping it (record limit, lock
// budget, fragmentation guard) an ordered fetch takes exactly the
// deliverable heads (minus groups the limiter refuses); capped, a subset
// of them. SHOAL_GROUP_SEEDS=N runs N seeds.
func TestGroupsRandomized(t *testing.T) {
	t.Parallel()
	seeds := uint64(groupSeeds)
	if testing.Short() {
		seeds = 200
	}
	if s := os.Getenv("SHOAL_GROUP_SEEDS"); s != "" {
		seeds, _ = strconv.ParseUint(s, 10, 64)
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runGroupsRandomized(t, seed) })
	}
}

func runGroupsRandomized(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 12))
	const n = 600
	l := &groupLog{groups: make([]string, n), absent: make([]bool, n), batchSize: int64(1 + rng.IntN(12))}
	l.skip = make([]bool, n/int(l.batchSize)+1)
	for i := range l.skip {
		l.skip[i] = rng.IntN(15) == 0
	}
	ng := 1 + rng.IntN(8)
	clean := rng.IntN(2) == 0 // every record grouped, no gaps: the early stop's path
	if clean {
		clear(l.skip)
	}
	for i := range n {
		l.absent[i] = !clean && rng.IntN(10) == 0
		if clean || rng.IntN(6) != 0 {
			l.groups[i] = fmt.Sprintf("g%d", rng.IntN(ng))
		}
	}
	truth := make([]string, n) // the log's own groups, none for an absent offset
	for o := range truth {
		if !l.absent[o] {
			truth[o] = l.groups[o]
		}
	}
	cfg := DefaultConfig()
	cfg.Groups = GroupMode(rng.IntN(3))
	cfg.MaxInFlight = 5 + rng.IntN(60)
	cfg.DeliveryCountLimit = 2 + rng.IntN(3)
	cfg.RecordLockDuration = 10 * time.Second
	cfg.DeadLetter = rng.IntN(2) == 0
	if rng.IntN(4) == 0 {
		cfg.OrderedBatch = 2 + rng.IntN(9) // an SQS FIFO queue's batches
	}
	if rng.IntN(2) == 0 {
		cfg.RedeliveryBackoff = time.Second
		cfg.RedeliveryBackoffMax = 4 * time.Second
	}
	p, eff, err := New(cfg, 0, 0)
	require.NoError(t, err)
	persisted := eff.Records
	now := t0
	logStart := int64(0)
	var trace []string
	keep := func(what string, e Effects) {
		trace = append(trace, what)
		persisted = append(persisted, e.Records...)
		if err := checkInternal(p); err != nil {
			t.Fatalf("seed %d after %v: %v\nspans %v known %d spso %d speo %d ranges %v", seed, trace[max(0, len(trace)-8):], err, p.mg.spans, p.mg.known, p.spso, p.speo, p.Ranges())
		}
	}
	members := []string{"a", "b", "c"}
	for range 500 {
		m := members[rng.IntN(len(members))]
		switch r := rng.IntN(100); {
		case r < 15:
			if p.groupMode() {
				keep("classify", p.Classify(l.read(p.ClassifyOffset(), int64(1+rng.IntN(40)))))
			}
		case r < 45:
			if !p.groupMode() {
				_, e := p.Acquire(now, m, l.read(p.NextFetchOffset(), int64(1+rng.IntN(40))), 1+rng.IntN(20), AcquireMode(rng.IntN(2)))
				keep("acquire", e)
				continue
			}
			if rng.IntN(2) == 0 {
				keep("classify", p.Classify(l.read(p.ClassifyOffset(), int64(1+rng.IntN(40)))))
			}
			keep("expire", p.ExpireLocks(now)) // so the oracle sees what the walk sees
			maxRecords := 1 + rng.IntN(20)
			if rng.IntN(2) == 0 {
				maxRecords = 1000
			}
			var limit GroupLimiter
			refused := map[string]bool{}
			if rng.IntN(3) == 0 {
				limit = func(id string, want int64) int64 {
					if rng.IntN(3) == 0 {
						refused[id] = true
						return 0
					}
					return want
				}
			}
			ordered := p.cfg.Groups == GroupsOrdered
			want := orderedOracle(p, truth)
			effMax := min(int64(maxRecords), int64(p.cfg.MaxInFlight)-p.acqs.locked())
			guard := len(p.runs) >= 2*p.cfg.MaxInFlight
			// The state before, formatted only if an assertion fails.
			before := lazyf("spans %v known %d ranges %v ready %d held %v open %v",
				slices.Clone(p.mg.spans), p.mg.known, p.Ranges(), p.mg.ready, slices.Clone(p.mg.held), slices.Clone(p.mg.open))
			got, e := p.AcquireGroupsLimited(now, m, maxRecords, limit)
			keep(fmt.Sprintf("acquireGroups %d", maxRecords), e)
			if !ordered || guard || effMax <= 0 || p.cfg.OrderedBatch > 1 {
				continue // the oracle knows heads only; the invariants hold for batches too
			}
			gotOffs := offsets(got)
			var wantNow []int64
			for _, o := range want {
				if !refused[truth[o]] {
					wantNow = append(wantNow, o)
				}
			}
			// The walk takes the deliverable records in offset order, so
			// a capped one takes the first of them.
			require.Equal(t, wantNow[:min(len(wantNow), len(gotOffs))], gotOffs, "seed %d after %v\nbefore: %s", seed, trace[max(0, len(trace)-8):], before)
			if int64(len(gotOffs)) < effMax {
				require.Equal(t, wantNow, gotOffs, "seed %d after %v\nbefore: %s", seed, trace[max(0, len(trace)-8):], before)
			}
		case r < 65: // ack a piece this member holds
			h, ok := p.members.lookup(m)
			if !ok {
				continue
			}
			var mine []span
			for i := range p.runs {
				mt := p.runs[i].meta()
				if mt.state() == StateAcquired && p.acqs.entries[mt.acq()].member == h {
					mine = append(mine, span{p.runStart(i), p.runEnd(i) - 1})
				}
			}
			if len(mine) == 0 {
				continue
			}
			s := mine[rng.IntN(len(mine))]
			lo := s.lo + rng.Int64N(s.hi-s.lo+1)
			hi := lo + rng.Int64N(s.hi-lo+1)
			types := []AckType{AckType(rng.IntN(5))}
			if rng.IntN(3) == 0 {
				types = make([]AckType, hi-lo+1)
				for i := range types {
					types[i] = AckType(rng.IntN(5))
				}
			}
			e, err := p.Acknowledge(now, m, []AckBatch{{First: lo, Last: hi, Types: types}})
			require.NoError(t, err)
			keep("ack", e)
		case r < 72:
			now = now.Add(time.Duration(1+rng.IntN(12)) * time.Second)
			keep("expire", p.ExpireLocks(now))
		case r < 75:
			keep("releaseMember", p.ReleaseMember(now, m))
		case r < 79:
			if as := p.Archiving(); len(as) > 0 {
				a := as[rng.IntN(len(as))]
				keep("completeArchiving", p.CompleteArchiving(a.First, a.First+rng.Int64N(a.Last-a.First+1)))
			}
		case r < 82:
			logStart += int64(rng.IntN(30))
			if rng.IntN(4) == 0 {
				logStart = max(logStart, p.speo+int64(rng.IntN(5)))
			}
			keep(fmt.Sprintf("advanceLogStart %d", logStart), p.AdvanceLogStart(logStart))
		case r < 88:
			c := p.Config()
			c.Groups = GroupMode(rng.IntN(3))
			c.DeadLetter = rng.IntN(2) == 0
			if rng.IntN(2) == 0 {
				c.RedeliveryBackoff, c.RedeliveryBackoffMax = 0, 0
			} else {
				c.RedeliveryBackoff, c.RedeliveryBackoffMax = time.Second, 4*time.Second
			}
			c.DeliveryCountLimit = 2 + rng.IntN(3)
			require.NoError(t, p.SetConfig(c))
			keep(fmt.Sprintf("setConfig %v", c.Groups), Effects{})
		case r < 91:
			q, err := Recover(p.Config(), persisted)
			require.NoError(t, err)
			p = q
			keep("recover", Effects{})
		case r < 92:
			e := p.Reset(p.stateEpoch+1, max(p.spso-int64(rng.IntN(20)), 0))
			persisted = nil
			keep("reset", e)
		case r < 96:
			if lk, ok := p.AcquisitionLock(p.spso); ok && len(p.runs) > 0 {
				h := p.runs[0].meta().acq()
				keep("unacquire", p.Unacquire(p.members.names[p.acqs.entries[h].member], []Acquired{{First: p.spso, Last: p.runEnd(0) - 1}}, lk))
			}
		default:
			if p.cfg.Groups == GroupsOrdered {
				_ = p.HeadShare(m, []string{"a", "b"})
			}
		}
	}
}

// Records waiting for their dead-letter write (Archiving) are passed over
// by the ordered scan like terminal ones: their groups are no heads.
func TestArchivingGroupsAreNoHeads(t *testing.T) {
	t.Parallel()
	h := newGroupHarness(t, &groupLog{groups: []string{"g0", "g1", "g2", "g3"}, batchSize: 4}, func(c *Config) {
		c.Groups = GroupsOrdered
		c.DeadLetter = true
	})
	require.Len(t, offsets(h.acquire("m1", 10)), 4)
	h.ack("m1", 0, 3, AckReject) // all Archiving: nothing to deliver, nothing in flight
	require.Empty(t, h.acquire("m1", 10))
	require.Zero(t, h.p.mg.openGroups)
	require.Equal(t, -1, h.p.HeadShare("m1", []string{"m2"}))
}

// lazyf formats its arguments only when printed (as a failure message's
// argument), not when built.
func lazyf(format string, args ...any) fmt.Stringer { return lazyfmt{format, args} }

type lazyfmt struct {
	format string
	args   []any
}

func (l lazyfmt) String() string { return fmt.Sprintf(l.format, l.args...) }
