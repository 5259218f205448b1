package sharegroup

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// groupLog is a simulated log: the message group of every offset ("" = no
// group), cut into batches of batchSize records as a producer would write.
type groupLog struct {
	groups    []string
	batchSize int64
	// Optional: absent[o] leaves offset o out of the log (a batch covers
	// the present records from its first to its last); skip[b] has the
	// broker skip batch b (aborted or control).
	absent, skip []bool
}

// read returns the batches from the one holding off, up to maxRecords
// records, as the broker hands them to Classify/Acquire.
func (l *groupLog) read(off int64, maxRecords int64) []LogBatch {
	var out []LogBatch
	end := int64(len(l.groups))
	missing := func(o int64) bool { return l.absent != nil && l.absent[o] }
	first := off - off%l.batchSize
	for n := int64(0); first < end && n < maxRecords; first += l.batchSize {
		lo, hi := first, min(first+l.batchSize, end)-1
		for lo <= hi && missing(lo) {
			lo++
		}
		for hi >= lo && missing(hi) {
			hi--
		}
		if lo > hi {
			continue
		}
		b := LogBatch{First: lo, Last: hi, Skip: l.skip != nil && l.skip[first/l.batchSize]}
		for o := lo; o <= hi; o++ {
			id := l.groups[o]
			if id == "" || missing(o) {
				continue
			}
			if k := len(b.Groups); k > 0 && b.Groups[k-1].ID == id && b.Groups[k-1].Last == o-1 {
				b.Groups[k-1].Last = o
			} else {
				b.Groups = append(b.Groups, GroupSpan{First: o, Last: o, ID: id})
			}
		}
		out = append(out, b)
		n += hi - lo + 1
	}
	return out
}

// groupHarness drives a Partition like the broker does and checks the
// bookkeeping and the durability contract after every step.
type groupHarness struct {
	t         *testing.T
	p         *Partition
	log       *groupLog
	persisted []Record
	now       time.Time
}

func newGroupHarness(t *testing.T, log *groupLog, mut ...func(*Config)) *groupHarness {
	cfg := DefaultConfig()
	for _, m := range mut {
		m(&cfg)
	}
	p, eff, err := New(cfg, 0, 0)
	require.NoError(t, err)
	return &groupHarness{t: t, p: p, log: log, persisted: eff.Records, now: t0}
}

func (h *groupHarness) keep(eff Effects) {
	h.persisted = append(h.persisted, eff.Records...)
	require.NoError(h.t, checkInternal(h.p))
}

// acquire classifies what the window allows, then acquires for member.
// Where Acquirable said nothing could be acquired and no lock was due
// (the broker's lock timer wakes long polls for those), nothing is: a
// long poll is not woken then (the broker's notifyIfAcquirable).
func (h *groupHarness) acquire(member string, maxRecords int) (got []Acquired) {
	due := h.p.NextDeadline()
	could := h.p.Acquirable(0, int64(len(h.log.groups))) || !due.IsZero() && !h.now.Before(due)
	defer func() {
		if !could {
			require.Empty(h.t, got, "Acquirable reported nothing to acquire")
		}
	}()
	for h.p.CanClassify() && h.p.ClassifyOffset() < int64(len(h.log.groups)) {
		before := h.p.ClassifyOffset()
		h.keep(h.p.Classify(h.log.read(before, 4096)))
		if h.p.ClassifyOffset() == before {
			break
		}
	}
	got, eff := h.p.AcquireGroups(h.now, member, maxRecords)
	h.keep(eff)
	return got
}

func (h *groupHarness) ack(member string, first, last int64, t AckType) {
	eff, err := h.p.Acknowledge(h.now, member, []AckBatch{{First: first, Last: last, Types: []AckType{t}}})
	require.NoError(h.t, err)
	h.keep(eff)
}

func offsets(acq []Acquired) []int64 {
	var out []int64
	for _, a := range acq {
		for o := a.First; o <= a.Last; o++ {
			out = append(out, o)
		}
	}
	return out
}

// The fairness test: one group with 100,000 records, 50 groups
// with 100 each, all produced before consumption; every small group is
// fully delivered within the first 20% of deliveries.
func TestFairSmallGroupsNotDelayedByBigGroup(t *testing.T) {
	t.Parallel()
	for _, layout := range []string{"big-first", "interleaved"} {
		t.Run(layout, func(t *testing.T) {
			var groups []string
			small := func() {
				for g := range 50 {
					for range 100 {
						groups = append(groups, fmt.Sprintf("small-%d", g))
					}
				}
			}
			if layout == "big-first" {
				for range 100_000 {
					groups = append(groups, "big")
				}
				small()
			} else { // the small groups' records land in the middle
				for range 50_000 {
					groups = append(groups, "big")
				}
				small()
				for range 50_000 {
					groups = append(groups, "big")
				}
			}
			h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 200}, func(c *Config) { c.Groups = GroupsFair })
			total := len(groups)
			left := map[string]int{}
			for _, g := range groups {
				left[g]++
			}
			done := map[string]int{} // group -> deliveries when it finished
			delivered := 0
			seen := make([]bool, total)
			for round := 0; delivered < total; round++ {
				member := fmt.Sprintf("m%d", round%8)
				got := h.acquire(member, 500)
				require.NotEmpty(t, got, "round %d: nothing acquired with %d left", round, total-delivered)
				for _, o := range offsets(got) {
					require.False(t, seen[o], "offset %d delivered twice", o)
					seen[o] = true
					delivered++
					g := groups[o]
					if left[g]--; left[g] == 0 {
						done[g] = delivered
					}
				}
				for _, a := range got {
					h.ack(member, a.First, a.Last, AckAccept)
				}
			}
			limit := total / 5
			for g := range 50 {
				name := fmt.Sprintf("small-%d", g)
				require.LessOrEqual(t, done[name], limit, "%s finished after %d of %d deliveries", name, done[name], total)
			}
			require.Equal(t, int64(total), h.p.SPSO())
			checkRecovery(t, h.p, h.persisted)
		})
	}
}

// Ordered mode with 8 consumers and 1,000 groups: each group's records
// are processed in offset order, none twice after an accept, and never
// two records of a group in flight at once — through releases, lock
// expiries, member departures and a restart.
func TestOrderedPerGroupFIFO(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	const nGroups, nRecords = 1000, fifoRecords
	groups := make([]string, nRecords)
	for i := range groups {
		if rng.IntN(50) == 0 {
			continue // no group: unordered
		}
		groups[i] = fmt.Sprintf("g%d", rng.IntN(nGroups))
	}
	h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 100}, func(c *Config) {
		c.Groups = GroupsOrdered
		c.RecordLockDuration = 10 * time.Second
	})
	accepted := make([]bool, nRecords)
	lastAccepted := map[string]int64{}
	held := map[string][]Acquired{}
	nAccepted := 0
	for step := 0; h.p.SPSO() < nRecords; step++ {
		if step >= 100_000 {
			t.Fatalf("no progress: %d accepted; SPSO %d SPEO %d known %d available %d ranges %v", nAccepted, h.p.SPSO(), h.p.SPEO(), h.p.mg.known, h.p.available, h.p.Ranges()[:min(5, len(h.p.Ranges()))])
		}
		member := fmt.Sprintf("m%d", rng.IntN(8))
		switch r := rng.IntN(100); {
		case r < 55: // fetch
			got := h.acquire(member, 1+rng.IntN(300))
			if len(got) == 0 {
				require.Empty(t, orderedOracle(h.p, groups), "a fetch got nothing while heads were deliverable")
			}
			held[member] = append(held[member], got...)
		case r < 90: // process what we hold
			for _, a := range held[member] {
				for o := a.First; o <= a.Last; o++ {
					typ := AckAccept
					if rng.IntN(10) == 0 {
						typ = AckRelease
					}
					h.ack(member, o, o, typ)
					if typ == AckAccept {
						require.False(t, accepted[o], "offset %d accepted twice", o)
						accepted[o] = true
						nAccepted++
						if g := groups[o]; g != "" {
							prev, ok := lastAccepted[g]
							require.True(t, !ok || prev < o, "group %s: %d accepted after %d", g, o, prev)
							lastAccepted[g] = o
						}
					}
				}
			}
			held[member] = nil
		case r < 93: // the member's locks expire
			h.now = h.now.Add(11 * time.Second)
			clear(held)
			h.keep(h.p.ExpireLocks(h.now))
		case r < 96: // the member leaves
			h.keep(h.p.ReleaseMember(h.now, member))
			held[member] = nil
		default: // restart: acquisitions are lost, acknowledgements are not
			q, err := Recover(h.p.Config(), h.persisted)
			require.NoError(t, err)
			h.p = q
			clear(held)
		}
		if step%4 != 0 {
			continue
		}
		// At most one record per group in flight.
		inFlight := map[string]int64{}
		for _, r := range h.p.Ranges() {
			if r.State != StateAcquired {
				continue
			}
			for o := r.First; o <= r.Last; o++ {
				if g := groups[o]; g != "" {
					prev, dup := inFlight[g]
					require.False(t, dup, "group %s has %d and %d in flight", g, prev, o)
					inFlight[g] = o
				}
			}
		}
	}
	require.Greater(t, nAccepted, nRecords*9/10)
	checkRecovery(t, h.p, h.persisted)
}

// A group with a record in flight gets no other one in ordered mode, even
// when an earlier record of it is Available again: after a switch from
// plain mode, where one member took several records of the group and
// released the first, the released record waits for the others. The
// broker classifies the window again from the SPSO after such a switch,
// over as many fetches as its read budget needs (16 MiB per fetch, or less
// on a read error); until it has classified every record in flight, any
// group may have one it does not know of, and grouped records wait.
func TestOrderedGroupWithRecordInFlightWaits(t *testing.T) {
	t.Parallel()
	groups := []string{"a", "a", "a", "b", "b"}
	h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 1})
	got, eff := h.p.Acquire(h.now, "m", h.log.read(0, 3), 3, RecordLimit)
	h.keep(eff)
	require.Equal(t, []Acquired{{0, 2, 1}}, got)
	h.ack("m", 0, 0, AckRelease)
	cfg := h.p.Config()
	cfg.Groups = GroupsOrdered
	require.NoError(t, h.p.SetConfig(cfg))
	h.keep(h.p.Classify(h.log.read(0, 1))) // one fetch's budget: offset 0 only
	require.Equal(t, int64(1), h.p.ClassifyOffset())
	got, eff = h.p.AcquireGroups(h.now, "n", 10)
	h.keep(eff)
	require.Empty(t, got, "1 and 2 are in flight in groups not known yet: 0 waits")
	require.Equal(t, []int64{3}, offsets(h.acquire("n", 10)), "a has 1 and 2 in flight: its released 0 waits")
	require.Empty(t, h.acquire("o", 10), "every group has a record in flight")
	h.ack("m", 1, 2, AckAccept)
	require.Equal(t, []int64{0}, offsets(h.acquire("o", 10)))
	checkRecovery(t, h.p, h.persisted)
}

// The seed design's limit: one message group filling the whole in-flight
// window (more than MaxInFlight consecutive records) must not starve the
// groups behind it, in ordered mode (its head held by a stuck consumer)
// and in fair mode.
func TestGroupsHugeGroupDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	for _, mode := range []GroupMode{GroupsOrdered, GroupsFair} {
		t.Run(mode.String(), func(t *testing.T) {
			var groups []string
			for range 130_000 {
				groups = append(groups, "huge")
			}
			for g := range 100 {
				for range 10 {
					groups = append(groups, fmt.Sprintf("g%d", g))
				}
			}
			h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 500}, func(c *Config) {
				c.Groups = mode
				c.MaxInFlight = 120_000
			})
			stuck := h.acquire("stuck", 1)
			require.Equal(t, []Acquired{{0, 0, 1}}, stuck)
			delivered := map[string]int{}
			for round := 0; round < 10_000; round++ {
				got := h.acquire("worker", 500)
				for _, o := range offsets(got) {
					delivered[groups[o]]++
				}
				for _, a := range got {
					h.ack("worker", a.First, a.Last, AckAccept)
				}
				small := 0
				for g, n := range delivered {
					if g != "huge" {
						small += n
					}
				}
				if len(got) == 0 || small == 1000 {
					break
				}
			}
			for g := range 100 {
				require.Equal(t, 10, delivered[fmt.Sprintf("g%d", g)], "group g%d", g)
			}
			require.Equal(t, int64(0), h.p.SPSO(), "the stuck record holds the SPSO")
			require.Greater(t, h.p.SPEO(), int64(130_000), "the window extends past the huge group")
			require.Less(t, len(h.p.runs)+len(h.p.mg.spans), 1000, "the window costs runs and spans, not offsets")
			checkRecovery(t, h.p, h.persisted)
		})
	}
}

// After a restart the groups are unknown until the broker classifies the
// window again; acknowledged records are never redelivered and the
// order holds.
func TestOrderedRecoverReclassifies(t *testing.T) {
	t.Parallel()
	groups := []string{"a", "b", "a", "b", "a", "b"}
	h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 6}, func(c *Config) { c.Groups = GroupsOrdered })
	require.Equal(t, []int64{0, 1}, offsets(h.acquire("m", 10)))
	h.ack("m", 0, 0, AckAccept)
	h.ack("m", 1, 1, AckRelease)
	require.Equal(t, []int64{1, 2}, offsets(h.acquire("m", 10)), "b's released record first, a's next")
	q, err := Recover(h.p.Config(), h.persisted)
	require.NoError(t, err)
	h.p = q
	require.Equal(t, int64(1), h.p.ClassifyOffset())
	got := h.acquire("n", 10)
	require.Equal(t, []Acquired{{1, 1, 2}, {2, 2, 1}}, got, "acquisitions were lost: redelivered in order")
	checkRecovery(t, h.p, h.persisted)
}

func TestGroupsSwitchModes(t *testing.T) {
	t.Parallel()
	groups := []string{"a", "a", "a", "b", "b", "b"}
	h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 3})
	got, eff := h.p.Acquire(h.now, "m", h.log.read(0, 3), 3, RecordLimit)
	h.keep(eff)
	require.Equal(t, []Acquired{{0, 2, 1}}, got)
	cfg := h.p.Config()
	cfg.Groups = GroupsOrdered
	require.NoError(t, h.p.SetConfig(cfg))
	require.Equal(t, int64(0), h.p.ClassifyOffset(), "switching on reclassifies the window")
	require.Equal(t, []int64{3}, offsets(h.acquire("n", 10)), "a is blocked by its record in flight")
	h.ack("m", 0, 2, AckAccept)
	h.ack("n", 3, 3, AckAccept)
	require.Equal(t, []int64{4}, offsets(h.acquire("n", 10)))
	cfg.Groups = GroupsNone
	require.NoError(t, h.p.SetConfig(cfg))
	got, eff = h.p.Acquire(h.now, "n", h.log.read(h.p.NextFetchOffset(), 10), 10, RecordLimit)
	h.keep(eff)
	require.Equal(t, []Acquired{{5, 5, 1}}, got)
	checkRecovery(t, h.p, h.persisted)
}

// Redelivery backoff: released or expired records wait backoff *
// 2^(deliveries-1) (capped) before they are Available again; others are
// not blocked; the delay is transient.
func TestRedeliveryBackoff(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.RedeliveryBackoff = time.Second
	cfg.RedeliveryBackoffMax = 3 * time.Second
	cfg.DeliveryCountLimit = 10
	p, eff0, err := New(cfg, 0, 0)
	require.NoError(t, err)
	persisted := eff0.Records
	keep := func(eff Effects) { persisted = append(persisted, eff.Records...); require.NoError(t, checkInternal(p)) }
	got, eff := p.Acquire(at(0), "a", batch(0, 1), 500, BatchOptimized)
	keep(eff)
	require.Equal(t, []Acquired{{0, 1, 1}}, got)
	keep(mustAck(t, p, at(0), "a", ack(0, 0, AckRelease)))
	require.WithinDuration(t, at(1), p.Ranges()[0].Deadline, 0, "available again after 1 s")
	require.Equal(t, StateAvailable, p.Ranges()[0].State)
	_, err = p.Acknowledge(at(0), "a", []AckBatch{ack(0, 0, AckAccept)})
	require.ErrorIs(t, err, ErrInvalidRecordState, "a released record is no longer the member's")

	got, eff = p.Acquire(at(0), "b", batch(0, 2), 500, BatchOptimized)
	keep(eff)
	require.Equal(t, []Acquired{{2, 2, 1}}, got, "the backing-off record is skipped, later ones are not")
	got, eff = p.Acquire(at(1), "b", batch(0, 2), 500, BatchOptimized)
	keep(eff)
	require.Equal(t, []Acquired{{0, 0, 2}}, got, "after the backoff, redelivered with its count")

	// Lock expiry backs off too, doubling: 2 s after the 2nd delivery.
	keep(p.ExpireLocks(at(31)))
	r := p.Ranges()[0]
	require.Equal(t, StateAvailable, r.State)
	require.Equal(t, int16(2), r.DeliveryCount)
	require.WithinDuration(t, at(33), r.Deadline, 0)
	// The backoff is transient: a restart makes the record Available now.
	checkRecovery(t, p, persisted)
	q, err := Recover(p.Config(), persisted)
	require.NoError(t, err)
	got, _ = q.Acquire(at(31), "c", batch(0, 0), 500, BatchOptimized)
	require.Equal(t, []Acquired{{0, 0, 3}}, got)
	// Capped at 3 s: the 3rd delivery's release would be 4 s.
	got, eff = p.Acquire(at(33), "b", batch(0, 2), 500, BatchOptimized)
	keep(eff)
	require.Equal(t, int16(3), got[0].DeliveryCount)
	keep(mustAck(t, p, at(33), "b", ack(0, 0, AckRelease)))
	require.WithinDuration(t, at(36), p.Ranges()[0].Deadline, 0)
	// Session close returns records at once, without a backoff.
	got, eff = p.Acquire(at(36), "d", batch(0, 2), 500, BatchOptimized)
	keep(eff)
	require.NotEmpty(t, got)
	keep(p.ReleaseMember(at(36), "d"))
	got, eff = p.Acquire(at(36), "e", batch(0, 2), 500, BatchOptimized)
	keep(eff)
	require.NotEmpty(t, got)
	checkRecovery(t, p, persisted)
}

// BenchmarkAcquireGroups: 8 members take turns acquiring 500 records and
// accepting them, 1,000 groups interleaved record by record (the worst
// case for spans), with the window full of classified records.
func BenchmarkAcquireGroups(b *testing.B) {
	for _, mode := range []GroupMode{GroupsFair, GroupsOrdered} {
		b.Run(mode.String(), func(b *testing.B) {
			const n = 2_000_000
			groups := make([]string, n)
			for i := range groups {
				groups[i] = "g" + strconv.Itoa(i%1000)
			}
			log := &groupLog{groups: groups, batchSize: 500}
			cfg := DefaultConfig()
			cfg.Groups = mode
			p, _, err := New(cfg, 0, 0)
			require.NoError(b, err)
			now := t0
			held := make([][]Acquired, 8)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m := i % 8
				member := "m" + strconv.Itoa(m)
				for _, a := range held[m] {
					if _, err := p.Acknowledge(now, member, []AckBatch{{First: a.First, Last: a.Last, Types: []AckType{AckAccept}}}); err != nil {
						b.Fatal(err)
					}
				}
				for p.CanClassify() && p.ClassifyOffset() < n {
					off := p.ClassifyOffset()
					p.Classify(log.read(off, 2000))
					if p.ClassifyOffset() == off {
						break
					}
				}
				held[m], _ = p.AcquireGroups(now, member, 500)
				if len(held[m]) == 0 && p.SPSO() >= n-10_000 {
					b.StopTimer()
					p, _, _ = New(cfg, 0, 0)
					clear(held)
					b.StartTimer()
				}
			}
		})
	}
}

// A GroupLimiter bounds each message group's acquisitions (the broker's
// per-message-group delivery rate limit); other groups are unaffected.
func TestGroupLimiter(t *testing.T) {
	t.Parallel()
	for _, mode := range []GroupMode{GroupsFair, GroupsOrdered} {
		t.Run(mode.String(), func(t *testing.T) {
			var groups []string
			for range 100 {
				groups = append(groups, "hot")
			}
			for g := range 10 {
				for range 3 {
					groups = append(groups, fmt.Sprintf("cold-%d", g))
				}
			}
			groups = append(groups, "", "") // no group: never limited
			h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 50}, func(c *Config) { c.Groups = mode })
			h.acquire("warm-up", 0) // classify everything
			h.keep(h.p.ReleaseMember(h.now, "warm-up"))
			tokens := map[string]int64{"hot": 2}
			if mode == GroupsOrdered {
				tokens["hot"] = 1 // one in flight anyway
			}
			asked := map[string]bool{}
			limit := func(id string, want int64) int64 {
				asked[id] = true
				n, ok := tokens[id]
				if !ok {
					return want // unlimited
				}
				n = min(n, want)
				tokens[id] -= n
				return n
			}
			got, eff := h.p.AcquireGroupsLimited(h.now, "m", 1000, limit)
			h.keep(eff)
			per := map[string]int{}
			for _, o := range offsets(got) {
				per[groups[o]]++
			}
			if mode == GroupsOrdered {
				require.Equal(t, 1, per["hot"])
				for g := range 10 {
					require.Equal(t, 1, per[fmt.Sprintf("cold-%d", g)])
				}
			} else {
				require.Equal(t, 2, per["hot"], "the limiter's two tokens")
				for g := range 10 {
					require.Equal(t, 3, per[fmt.Sprintf("cold-%d", g)])
				}
			}
			require.Equal(t, 2, per[""], "records without a group are not limited")
			require.False(t, asked[""])
			// Spent: the hot group gets nothing more until tokens return.
			for _, a := range got {
				h.ack("m", a.First, a.Last, AckAccept)
			}
			got, eff = h.p.AcquireGroupsLimited(h.now, "m", 1000, limit)
			h.keep(eff)
			for _, o := range offsets(got) {
				require.NotEqual(t, "hot", groups[o], "offset %d", o)
			}
			tokens["hot"] = 1
			got, eff = h.p.AcquireGroupsLimited(h.now, "m", 1000, limit)
			h.keep(eff)
			hot := 0
			for _, o := range offsets(got) {
				if groups[o] == "hot" {
					hot++
				}
			}
			require.Equal(t, 1, hot)
		})
	}
}

// In a group mode the window may hold more than MaxInFlight records, but
// no more than MaxInFlight of them are locked at once
// (share.partition.max.record.locks).
func TestGroupsMaxRecordLocks(t *testing.T) {
	t.Parallel()
	for _, mode := range []GroupMode{GroupsFair, GroupsOrdered} {
		t.Run(mode.String(), func(t *testing.T) {
			var groups []string
			for i := range 2000 {
				groups = append(groups, fmt.Sprintf("g%d", i%500))
			}
			h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 100}, func(c *Config) {
				c.Groups = mode
				c.MaxInFlight = 300
			})
			total := 0
			for m := range 4 {
				total += len(offsets(h.acquire(fmt.Sprintf("m%d", m), 200)))
			}
			require.Equal(t, 300, total, "locked records capped at MaxInFlight")
			require.Equal(t, int64(300), h.p.acqs.locked())
			h.keep(h.p.ReleaseMember(h.now, "m0"))
			require.NotEmpty(t, h.acquire("m4", 200), "releasing frees locks")
		})
	}
}

// TestUnacquireKeepsANewAcquisition: the broker reads the log between
// acquiring and giving back what it could not send. If meanwhile the
// member's records were released (its session closed) and acquired
// again, Unacquire of the old acquisition must leave the new one alone:
// otherwise a second member could take records the first still holds.
// (Found by review.)
func TestUnacquireKeepsANewAcquisition(t *testing.T) {
	t.Parallel()
	h := newGroupHarness(t, &groupLog{groups: []string{"a", "b", "a", "b"}, batchSize: 4}, func(c *Config) { c.Groups = GroupsOrdered })
	acq := h.acquire("m1", 10)
	require.Equal(t, []int64{0, 1}, offsets(acq))
	lock, ok := h.p.AcquisitionLock(acq[0].First)
	require.True(t, ok)
	h.now = h.now.Add(time.Millisecond)
	h.keep(h.p.ReleaseMember(h.now, "m1"))
	h.now = h.now.Add(time.Millisecond)
	require.Equal(t, []int64{0, 1}, offsets(h.acquire("m1", 10)), "the same heads, acquired anew")
	h.keep(h.p.Unacquire("m1", acq, lock)) // the stale give-back
	require.Empty(t, h.acquire("m2", 10), "m1 still holds both groups' heads")
	cur, ok := h.p.AcquisitionLock(acq[0].First)
	require.True(t, ok)
	require.NotEqual(t, lock, cur)
	h.keep(h.p.Unacquire("m1", acq, cur)) // giving back the current acquisition works
	require.Equal(t, []int64{0, 1}, offsets(h.acquire("m2", 10)))
}

// TestHeldUntil: the earliest lock deadline among a member's acquisitions,
// while it holds any.
func TestHeldUntil(t *testing.T) {
	t.Parallel()
	h := newGroupHarness(t, &groupLog{groups: []string{"a", "b", "c", "a", "b", "c"}, batchSize: 6}, func(c *Config) { c.Groups = GroupsOrdered })
	lockFor := h.p.Config().RecordLockDuration
	_, ok := h.p.HeldUntil("m1")
	require.False(t, ok, "holds nothing yet")
	first := h.now
	require.Equal(t, []int64{0}, offsets(h.acquire("m1", 1)))
	h.now = h.now.Add(time.Second)
	require.Equal(t, []int64{1}, offsets(h.acquire("m1", 1)))
	require.Equal(t, []int64{2}, offsets(h.acquire("m2", 1)))
	d, ok := h.p.HeldUntil("m1")
	require.True(t, ok)
	require.True(t, d.Equal(first.Add(lockFor)), "the earlier of m1's two acquisitions: %v", d)
	h.ack("m1", 0, 0, AckAccept)
	d, ok = h.p.HeldUntil("m1")
	require.True(t, ok)
	require.True(t, d.Equal(first.Add(time.Second+lockFor)), "only the later one is left: %v", d)
	h.ack("m1", 1, 1, AckAccept)
	_, ok = h.p.HeldUntil("m1")
	require.False(t, ok, "holds nothing any more")
	d, ok = h.p.HeldUntil("m2")
	require.True(t, ok)
	require.True(t, d.Equal(first.Add(time.Second+lockFor)))
}

// The fragmentation guard pauses group-mode acquisitions while the runs
// exceed twice MaxInFlight, until the SPSO moves; with nothing in flight
// nothing else would move it, so one record at a time still goes out.
// (Found by a review: the share-partition stopped delivering for good.)
func TestFragmentationGuardDoesNotStallAnIdlePartition(t *testing.T) {
	t.Parallel()
	for _, mode := range []GroupMode{GroupsOrdered, GroupsFair} {
		t.Run(mode.String(), func(t *testing.T) {
			groups := make([]string, 20)
			for i := range groups {
				groups[i] = fmt.Sprintf("g%d", i)
			}
			h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 20}, func(c *Config) {
				c.Groups = mode
				c.MaxInFlight = 3
			})
			require.Equal(t, []int64{0}, offsets(h.acquire("s", 1))) // a slow consumer holds the SPSO
			// Another member accepts and rejects records alternately:
			// Acknowledged and Archived runs, which do not merge.
			for k := 0; len(h.p.runs) < 2*h.p.cfg.MaxInFlight; k++ {
				got := offsets(h.acquire("w", 1))
				require.Len(t, got, 1)
				h.ack("w", got[0], got[0], []AckType{AckAccept, AckReject}[k%2])
			}
			require.Empty(t, h.acquire("w", 10), "guarded while a record is in flight")
			h.keep(h.p.ReleaseMember(h.now, "s")) // the slow consumer leaves: nothing in flight
			for step := 0; h.p.SPSO() < int64(len(groups)); step++ {
				guarded := len(h.p.runs) >= 2*h.p.cfg.MaxInFlight
				got := h.acquire("w", 10)
				require.NotEmpty(t, got, "nothing in flight, %d records Available, runs %d: %v", h.p.available, len(h.p.runs), h.p.Ranges())
				if guarded {
					require.Len(t, offsets(got), 1, "over the guard: one record at a time")
				}
				for _, a := range got {
					h.ack("w", a.First, a.Last, AckAccept)
				}
				require.Less(t, step, 20)
			}
		})
	}
}

// TestOrderedAcquiredAfter: an ordered acquisition names the latest
// Acknowledge that ended the previous record of a message group it
// acquired from (the broker hands those records out once that
// Acknowledge is durable); releases, records without a group and fair
// mode never count, a group new to the window counts the latest
// Acknowledge that ended any record, and a record ended before its group
// was known (in plain mode, before a switch) counts for every group.
func TestOrderedAcquiredAfter(t *testing.T) {
	t.Parallel()
	log := &groupLog{groups: []string{"a", "a", "b", "b", "", "c"}, batchSize: 1}
	h := newGroupHarness(t, log, func(c *Config) { c.Groups = GroupsOrdered })
	require.Equal(t, []int64{0, 2, 4, 5}, offsets(h.acquire("m", 10)))
	require.Zero(t, h.p.AcquiredAfter())

	h.ack("m", 0, 0, AckAccept)  // 1
	h.ack("m", 2, 2, AckRelease) // 2
	require.Equal(t, uint64(2), h.p.AckSeq())
	require.Equal(t, []int64{1, 2}, offsets(h.acquire("n", 10)))
	require.Equal(t, uint64(1), h.p.AcquiredAfter(), "a's 1 follows the acceptance of 0; b's released 2 follows nothing")

	h.ack("n", 2, 2, AckAccept) // 3
	h.ack("m", 4, 4, AckAccept) // 4: no group
	require.Equal(t, []int64{3}, offsets(h.acquire("o", 10)))
	require.Equal(t, uint64(3), h.p.AcquiredAfter())
	require.Empty(t, h.acquire("o", 10))
	require.Zero(t, h.p.AcquiredAfter(), "each call says it anew")

	h.ack("o", 3, 3, AckAccept) // 5
	h.ack("n", 1, 1, AckAccept) // 6
	h.ack("m", 5, 5, AckReject) // 7: c ends, and so does the window
	require.Equal(t, int64(6), h.p.SPSO())
	log.groups = append(log.groups, "c", "e")
	require.Equal(t, []int64{6, 7}, offsets(h.acquire("p", 10)))
	require.Equal(t, uint64(7), h.p.AcquiredAfter(), "c is new to the window again: its 6 waits for the end of 5")

	// Ended in plain mode, before a switch to ordered mode: no group
	// was known for it, so every group's records count it.
	sw := newGroupHarness(t, &groupLog{groups: []string{"a", "a", "b"}, batchSize: 1})
	got, eff := sw.p.Acquire(sw.now, "m", sw.log.read(0, 1), 1, RecordLimit)
	sw.keep(eff)
	require.Equal(t, []int64{0}, offsets(got))
	sw.ack("m", 0, 0, AckAccept) // 1
	cfg := sw.p.Config()
	cfg.Groups = GroupsOrdered
	require.NoError(t, sw.p.SetConfig(cfg))
	require.Equal(t, []int64{1, 2}, offsets(sw.acquire("n", 10)))
	require.Equal(t, uint64(1), sw.p.AcquiredAfter())

	// Ended past Classify's reach, in a group already known (c's 0 in
	// flight keeps the SPSO, and a's handle, where they are): the group
	// learns of it only when Classify gets there.
	bl := newGroupHarness(t, &groupLog{groups: []string{"c", "a", "a", "a", "a"}, batchSize: 1})
	got, eff = bl.p.Acquire(bl.now, "m", bl.log.read(0, 4), 4, RecordLimit)
	bl.keep(eff)
	require.Equal(t, []int64{0, 1, 2, 3}, offsets(got))
	cfg = bl.p.Config()
	cfg.Groups = GroupsOrdered
	require.NoError(t, bl.p.SetConfig(cfg))
	bl.keep(bl.p.Classify(bl.log.read(0, 2)))
	require.Equal(t, int64(2), bl.p.ClassifyOffset())
	bl.ack("m", 1, 1, AckAccept) // a's, known
	bl.ack("m", 3, 3, AckAccept) // past known
	bl.ack("m", 2, 2, AckAccept) // past known
	require.Equal(t, uint64(3), bl.p.AckSeq())
	require.Equal(t, []int64{4}, offsets(bl.acquire("n", 10)))
	require.Equal(t, uint64(3), bl.p.AcquiredAfter(), "a's 4 follows the end of 2 and 3, not only of 1")

	f := newGroupHarness(t, &groupLog{groups: []string{"a", "a"}, batchSize: 1}, func(c *Config) { c.Groups = GroupsFair })
	require.Equal(t, []int64{0, 1}, offsets(f.acquire("m", 10)))
	f.ack("m", 0, 0, AckAccept)
	f.ack("m", 1, 1, AckRelease)
	require.Equal(t, []int64{1}, offsets(f.acquire("n", 10)))
	require.Zero(t, f.p.AcquiredAfter(), "fair mode keeps no order")
}

// TestAcquirable: what Acquirable reports as the window changes. Ordered
// mode: nothing while every group with records to deliver has one in
// flight, though most of the window is Available; a group's head once
// its record in flight ends; a record without a group; records the log
// holds beyond what is classified. Fair and plain mode: Available
// records, or room to read more of the log.
func TestAcquirable(t *testing.T) {
	t.Parallel()
	log := &groupLog{groups: []string{"a", "b", "a", "b", "a", "b"}, batchSize: 2}
	h := newGroupHarness(t, log, func(c *Config) { c.Groups = GroupsOrdered })
	end := int64(len(log.groups))
	require.True(t, h.p.Acquirable(0, end), "nothing classified yet")
	require.False(t, h.p.Acquirable(0, 0), "nor anything readable")
	require.Equal(t, []int64{0, 1}, offsets(h.acquire("m", 10)))
	require.False(t, h.p.Acquirable(0, end), "a and b have their heads in flight")
	require.True(t, h.p.Acquirable(1, end), "the log start past a's head: an acquisition drops it")
	h.ack("m", 0, 0, AckAccept)
	require.True(t, h.p.Acquirable(0, end), "a's 2 is its head now")
	require.Equal(t, []int64{2}, offsets(h.acquire("m", 10)))
	require.False(t, h.p.Acquirable(0, end))
	log.groups = append(log.groups, "", "c")
	require.True(t, h.p.Acquirable(0, int64(len(log.groups))), "appended, not classified")
	require.Equal(t, []int64{6, 7}, offsets(h.acquire("n", 10)))
	require.False(t, h.p.Acquirable(0, int64(len(log.groups))))
	h.ack("n", 6, 6, AckRelease)
	require.True(t, h.p.Acquirable(0, int64(len(log.groups))), "a released record without a group")

	fair := newGroupHarness(t, &groupLog{groups: []string{"a", "a"}, batchSize: 1}, func(c *Config) { c.Groups = GroupsFair })
	require.True(t, fair.p.Acquirable(0, 2))
	require.Equal(t, []int64{0, 1}, offsets(fair.acquire("m", 10)))
	require.False(t, fair.p.Acquirable(0, 2), "both in flight")
	fair.ack("m", 1, 1, AckRelease)
	require.True(t, fair.p.Acquirable(0, 2))

	plain := newGroupHarness(t, &groupLog{groups: []string{"", ""}, batchSize: 2})
	require.True(t, plain.p.Acquirable(0, 2), "room to read the log")
	got, eff := plain.p.Acquire(plain.now, "m", plain.log.read(0, 2), 2, BatchOptimized)
	plain.keep(eff)
	require.Equal(t, []int64{0, 1}, offsets(got))
	require.False(t, plain.p.Acquirable(0, 2), "all of the log in flight")
	require.True(t, plain.p.Acquirable(1, 2), "the log start past the SPSO")
	require.True(t, plain.p.Acquirable(0, 3), "more of it readable")
	plain.ack("m", 0, 0, AckRelease)
	require.True(t, plain.p.Acquirable(0, 2))
}

// TestAcquirableBackoffAndDueLocks: a released record waiting out its
// redelivery backoff is Acquired until then, so Acquirable says no in
// every mode, and still no once the backoff is due but not expired: the
// broker's lock timer, which expires it, wakes the waiting fetches. An
// acquisition then (it expires what is due first) hands the record out.
func TestAcquirableBackoffAndDueLocks(t *testing.T) {
	t.Parallel()
	for _, mode := range []GroupMode{GroupsOrdered, GroupsFair, GroupsNone} {
		log := &groupLog{groups: []string{"a", "a"}, batchSize: 2}
		h := newGroupHarness(t, log, func(c *Config) { c.Groups = mode; c.RedeliveryBackoff = time.Second })
		end := int64(len(log.groups))
		// Plain mode acquires from the log read, the group modes
		// from what they classified.
		acquire := func(member string) []Acquired {
			if mode == GroupsNone {
				got, eff := h.p.Acquire(h.now, member, h.log.read(0, 2), 2, RecordLimit)
				h.keep(eff)
				return got
			}
			return h.acquire(member, 10)
		}
		require.NotEmpty(t, acquire("m"))
		h.ack("m", 0, 0, AckRelease)
		if mode == GroupsFair {
			h.ack("m", 1, 1, AckAccept)
		}
		require.False(t, h.p.Acquirable(0, end), "mode %v: the backing-off record counts as held", mode)
		h.now = h.now.Add(2 * time.Second)
		require.False(t, h.p.Acquirable(0, end), "mode %v: due, not expired yet", mode)
		after := acquire("n")
		require.NotEmpty(t, after, "mode %v", mode)
		require.Equal(t, int64(0), after[0].First, "mode %v", mode)
	}
}
