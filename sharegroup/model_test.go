package sharegroup

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// model is a deliberately naive per-offset reference implementation of the
// share-partition rules. The property test runs random operations against
// both and requires identical results and states.
type model struct {
	cfg        Config
	spso, speo int64
	recs       map[int64]*mrec // offsets in [spso, speo); missing = available, count 0
}

type mrec struct {
	state    RecordState
	count    int
	member   string
	deadline int64
}

func newModel(cfg Config, spso int64) *model {
	return &model{cfg: cfg, spso: spso, speo: spso, recs: map[int64]*mrec{}}
}

func (m *model) get(o int64) *mrec {
	r := m.recs[o]
	if r == nil {
		r = &mrec{}
		m.recs[o] = r
	}
	return r
}

func (m *model) archived() RecordState {
	if m.cfg.DeadLetter {
		return StateArchiving
	}
	return StateArchived
}

func (m *model) release(r *mrec) {
	r.member, r.deadline = "", 0
	if r.count >= m.cfg.DeliveryCountLimit {
		r.state = m.archived()
	} else {
		r.state = StateAvailable
	}
}

func (m *model) expire(now int64) {
	for o := m.spso; o < m.speo; o++ {
		if r := m.get(o); r.state == StateAcquired && r.deadline <= now {
			m.release(r)
		}
	}
	m.advance()
}

func (m *model) advance() {
	for m.spso < m.speo && m.get(m.spso).state.Terminal() {
		delete(m.recs, m.spso)
		m.spso++
	}
}

func (m *model) dropBelow(off int64) {
	for ; m.spso < off && m.spso < m.speo; m.spso++ {
		delete(m.recs, m.spso)
	}
	if off > m.spso {
		m.spso, m.speo = off, off
	}
}

func (m *model) nextFetch() int64 {
	for o := m.spso; o < m.speo; o++ {
		if m.get(o).state == StateAvailable {
			return o
		}
	}
	return m.speo
}

func (m *model) canAcquire() bool {
	return m.nextFetch() < m.speo || m.speo-m.spso < int64(m.cfg.MaxInFlight)
}

func (m *model) nextDeadline() int64 {
	d := int64(math.MaxInt64)
	for o := m.spso; o < m.speo; o++ {
		if r := m.get(o); r.state == StateAcquired {
			d = min(d, r.deadline)
		}
	}
	return d
}

func (m *model) archiveAbsent(lo, hi int64) bool {
	for ; lo <= hi && lo < m.speo; lo++ {
		if r := m.get(lo); r.state == StateAvailable {
			r.state = StateArchived
		}
	}
	if lo > hi {
		return true
	}
	m.advance()
	if m.spso == m.speo {
		m.dropBelow(hi + 1)
		return true
	}
	for ; lo <= hi; lo++ {
		if lo >= m.spso+int64(m.cfg.MaxInFlight) {
			return false
		}
		m.recs[lo] = &mrec{state: StateArchived}
		m.speo = lo + 1
	}
	return true
}

func (m *model) acquire(now int64, member string, batches []LogBatch, maxRecords int, mode AcquireMode) []Acquired {
	m.expire(now)
	if maxRecords <= 0 {
		maxRecords = math.MaxInt
	}
	var out []Acquired
	got := 0
	take := func(o int64, r *mrec) {
		r.state, r.count, r.member, r.deadline = StateAcquired, min(r.count+1, maxStoredCount), member, now+int64(m.cfg.RecordLockDuration)
		got++
		if n := len(out); n > 0 && out[n-1].Last+1 == o && int(out[n-1].DeliveryCount) == r.count {
			out[n-1].Last = o
		} else {
			out = append(out, Acquired{First: o, Last: o, DeliveryCount: int16(r.count)})
		}
	}
	cursor, prev := m.nextFetch(), int64(-1)
outer:
	for _, b := range batches {
		if b.First > b.Last || b.First <= prev || b.First < 0 {
			break
		}
		prev = b.Last
		if b.Last < cursor {
			continue
		}
		lo := max(b.First, cursor)
		if lo > cursor && !m.archiveAbsent(cursor, lo-1) {
			break
		}
		if b.Skip {
			if !m.archiveAbsent(lo, b.Last) {
				break
			}
			cursor = b.Last + 1
			continue
		}
		for o := lo; o <= b.Last && o < m.speo; o++ {
			if mode == RecordLimit && got >= maxRecords {
				break outer
			}
			if r := m.get(o); r.state == StateAvailable {
				take(o, r)
			}
		}
		if mode == RecordLimit && got >= maxRecords {
			break
		}
		for o := max(lo, m.speo); o <= b.Last; o++ {
			if o >= m.spso+int64(m.cfg.MaxInFlight) || (mode == RecordLimit && got >= maxRecords) {
				break outer
			}
			m.speo = o + 1
			take(o, m.get(o))
		}
		cursor = b.Last + 1
		if got >= maxRecords {
			break
		}
	}
	m.advance()
	return out
}

func (m *model) acknowledge(now int64, member string, acks []AckBatch) error {
	m.expire(now)
	m.advance() // expiries stand even if the acknowledgement fails
	prev := int64(-1)
	renew := false
	for i, b := range acks {
		if b.First < 0 || b.First > b.Last || (i > 0 && b.First <= prev) || len(b.Types) == 0 ||
			(len(b.Types) > 1 && int64(len(b.Types)) != b.Last-b.First+1) {
			return ErrInvalidRequest
		}
		for _, t := range b.Types {
			if t > AckRenew {
				return ErrInvalidRequest
			}
			renew = renew || t == AckRenew
		}
		prev = b.Last
	}
	if renew && m.cfg.RenewDisabled {
		return ErrInvalidRecordState
	}
	for _, b := range acks {
		lo := max(b.First, m.spso)
		if lo > b.Last {
			continue
		}
		if b.Last >= m.speo {
			return ErrInvalidRequest
		}
		for o := lo; o <= b.Last; o++ {
			if r := m.get(o); r.state != StateAcquired || r.member != member {
				return ErrInvalidRecordState
			}
		}
	}
	for _, b := range acks {
		for o := max(b.First, m.spso); o <= b.Last; o++ {
			t := b.Types[0]
			if len(b.Types) > 1 {
				t = b.Types[o-b.First]
			}
			r := m.get(o)
			switch t {
			case AckAccept:
				r.state, r.member, r.deadline = StateAcknowledged, "", 0
			case AckRelease:
				m.release(r)
			case AckReject:
				r.state, r.member, r.deadline = m.archived(), "", 0
			case AckGap:
				r.state, r.member, r.deadline = StateArchived, "", 0
			case AckRenew:
				r.deadline = now + int64(m.cfg.RecordLockDuration)
			}
		}
	}
	m.advance()
	return nil
}

func (m *model) releaseMember(now int64, member string) {
	m.expire(now)
	for o := m.spso; o < m.speo; o++ {
		if r := m.get(o); r.state == StateAcquired && r.member == member {
			r.state, r.count, r.member, r.deadline = StateAvailable, max(r.count-1, 0), "", 0
		}
	}
	m.advance()
}

func (m *model) completeArchiving(lo, hi int64) {
	for o := max(lo, m.spso); o <= hi && o < m.speo; o++ {
		if r := m.get(o); r.state == StateArchiving {
			r.state = StateArchived
		}
	}
	m.advance()
}

// restart keeps only what is durable: acquisitions are forgotten
// (Available with the count before the acquisition) and the window ends
// after the last offset whose durable state is not "available, count 0".
func (m *model) restart() {
	end := m.spso
	for o := m.spso; o < m.speo; o++ {
		r := m.get(o)
		if r.state == StateAcquired {
			r.state, r.count, r.member, r.deadline = StateAvailable, max(r.count-1, 0), "", 0
		}
		if r.state != StateAvailable || r.count != 0 {
			end = o + 1
		}
	}
	for o := end; o < m.speo; o++ {
		delete(m.recs, o)
	}
	m.speo = end
}

func (m *model) compare(p *Partition) error {
	if m.spso != p.SPSO() || m.speo != p.SPEO() {
		return fmt.Errorf("window model %d-%d, impl %d-%d", m.spso, m.speo, p.SPSO(), p.SPEO())
	}
	var complete int64
	for _, r := range p.Ranges() {
		for o := r.First; o <= r.Last; o++ {
			want := m.get(o)
			if want.state.Terminal() {
				complete++
			}
			got := mrec{state: r.State, count: int(r.DeliveryCount), member: r.Member}
			if r.State == StateAcquired {
				got.deadline = r.Deadline.UnixNano()
			}
			if *want != got {
				return fmt.Errorf("offset %d: model %+v, impl %+v", o, *want, got)
			}
		}
	}
	if complete != p.DeliveryCompleteCount() {
		return fmt.Errorf("complete: model %d, impl %d", complete, p.DeliveryCompleteCount())
	}
	if nf := m.nextFetch(); nf != p.NextFetchOffset() {
		return fmt.Errorf("next fetch: model %d, impl %d", nf, p.NextFetchOffset())
	}
	if m.canAcquire() != p.CanAcquire() {
		return fmt.Errorf("can acquire: model %t", m.canAcquire())
	}
	d, pd := m.nextDeadline(), p.NextDeadline()
	if (d == math.MaxInt64) != pd.IsZero() || (!pd.IsZero() && pd.UnixNano() != d) {
		return fmt.Errorf("next deadline: model %d, impl %v", d, pd)
	}
	return nil
}

// testLog is a fixed random log layout: batches with compaction holes
// between some of them and a few control (skip) batches.
type testLog []LogBatch

func newTestLog(rng *rand.Rand, n int64) testLog {
	var l testLog
	for off := int64(0); off < n; {
		if rng.IntN(8) == 0 {
			off += 1 + rng.Int64N(4) // compaction hole
		}
		size := 1 + rng.Int64N(8)
		l = append(l, LogBatch{First: off, Last: off + size - 1, Skip: rng.IntN(12) == 0})
		off += size
	}
	return l
}

// read returns up to k batches containing or following from, like a log
// read starting at from.
func (l testLog) read(from int64, k int) []LogBatch {
	for i, b := range l {
		if b.Last >= from {
			return l[i:min(i+k, len(l))]
		}
	}
	return nil
}

func TestPropertyAgainstModel(t *testing.T) {
	t.Parallel()
	seeds := 300
	if v, err := strconv.Atoi(os.Getenv("SHAREGROUP_SEEDS")); err == nil {
		seeds = v
	}
	if testing.Short() {
		seeds = 50
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runRandom(t, uint64(seed), 400)
		})
	}
}

func runRandom(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	cfg := Config{
		RecordLockDuration: 10 * time.Second,
		DeliveryCountLimit: 2 + rng.IntN(3),
		MaxInFlight:        5 + rng.IntN(60),
		DeadLetter:         rng.IntN(3) == 0,
		RenewDisabled:      rng.IntN(5) == 0,
	}
	log := newTestLog(rng, 600)
	spso := rng.Int64N(5)
	p, eff, err := New(cfg, 3, spso)
	require.NoError(t, err)
	persisted := eff.Records
	m := newModel(cfg, spso)
	now := t0
	membersIDs := []string{"a", "b", "c", "d"}
	var trace []string
	before := ""
	fail := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("seed %d: %v\ntrace:\n%s\nimpl before the last op:\n%s\nimpl now:\n%s", seed, err, joinLast(trace, 30), before, dumpRanges(p))
		}
	}
	for step := 0; step < steps; step++ {
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		member := membersIDs[rng.IntN(len(membersIDs))]
		before = dumpRanges(p)
		var eff Effects
		noEffects := false
		switch op := rng.IntN(100); {
		case op < 35:
			from := p.NextFetchOffset()
			if rng.IntN(20) == 0 {
				from = p.SPSO() + rng.Int64N(40) - 10 // a broker reading from the wrong place
			}
			batches := log.read(from, 1+rng.IntN(6))
			maxRecords := rng.IntN(25)
			mode := AcquireMode(rng.IntN(2))
			trace = append(trace, fmt.Sprintf("acquire %s max=%d mode=%v %v", member, maxRecords, mode, batches))
			var got []Acquired
			got, eff = p.Acquire(now, member, batches, maxRecords, mode)
			want := m.acquire(now.UnixNano(), member, batches, maxRecords, mode)
			if fmt.Sprint(want) != fmt.Sprint(got) {
				fail(fmt.Errorf("acquired: model %v, impl %v", want, got))
			}
		case op < 70:
			acks := randomAcks(rng, m, member)
			trace = append(trace, fmt.Sprintf("ack %s %v", member, acks))
			var err error
			eff, err = p.Acknowledge(now, member, acks)
			want := m.acknowledge(now.UnixNano(), member, acks)
			if !errors.Is(err, want) && !(err == nil && want == nil) {
				fail(fmt.Errorf("ack error: model %v, impl %v", want, err))
			}
		case op < 78:
			now = now.Add(time.Duration(rng.IntN(15)) * time.Second)
			trace = append(trace, "expire")
			eff = p.ExpireLocks(now)
			m.expire(now.UnixNano())
			m.advance()
		case op < 84:
			trace = append(trace, "release-member "+member)
			eff = p.ReleaseMember(now, member)
			m.releaseMember(now.UnixNano(), member)
		case op < 87:
			off := p.SPSO() + rng.Int64N(10)
			trace = append(trace, fmt.Sprint("log-start ", off))
			eff = p.AdvanceLogStart(off)
			m.dropBelow(off)
			m.advance()
		case op < 91:
			lo := p.SPSO() + rng.Int64N(20) - 2
			hi := lo + rng.Int64N(10)
			trace = append(trace, fmt.Sprintf("complete-archiving %d-%d", lo, hi))
			eff = p.CompleteArchiving(lo, hi)
			m.completeArchiving(lo, hi)
		case op < 95:
			trace = append(trace, "restart")
			q, err := Recover(cfg, persisted)
			fail(err)
			p = q
			m.restart()
			noEffects = true
		case op < 97:
			trace = append(trace, "compact")
			persisted = []Record{p.Snapshot()}
			noEffects = true
		default:
			cfg.DeliveryCountLimit = 2 + rng.IntN(3)
			cfg.MaxInFlight = 5 + rng.IntN(60)
			trace = append(trace, fmt.Sprintf("set-config limit=%d window=%d", cfg.DeliveryCountLimit, cfg.MaxInFlight))
			fail(p.SetConfig(cfg))
			m.cfg = cfg
			noEffects = true
		}
		persisted = append(persisted, eff.Records...)
		if d := p.NextDeadline(); !noEffects && !eff.NextDeadline.Equal(d) {
			fail(fmt.Errorf("effects deadline %v, partition %v", eff.NextDeadline, d))
		}
		fail(checkInternal(p))
		fail(m.compare(p))
		if step%10 == 0 || step == steps-1 {
			checkRecovery(t, p, persisted)
		}
	}
}

// randomAcks mostly acknowledges what the member holds, sometimes garbage.
func randomAcks(rng *rand.Rand, m *model, member string) []AckBatch {
	var held []int64
	for o := m.spso; o < m.speo; o++ {
		if r := m.get(o); r.state == StateAcquired && r.member == member {
			held = append(held, o)
		}
	}
	types := func(n int64) []AckType {
		if rng.IntN(2) == 0 || n > 20 {
			return []AckType{AckType(rng.IntN(5))}
		}
		ts := make([]AckType, n)
		for i := range ts {
			ts[i] = AckType(rng.IntN(5))
		}
		return ts
	}
	var acks []AckBatch
	if len(held) == 0 || rng.IntN(6) == 0 {
		lo := m.spso + rng.Int64N(20) - 5
		hi := lo + rng.Int64N(6)
		return []AckBatch{{First: lo, Last: hi, Types: types(hi - lo + 1)}}
	}
	for i := 0; i < len(held); {
		j := i
		for j+1 < len(held) && held[j+1] == held[j]+1 && rng.IntN(6) != 0 {
			j++
		}
		if rng.IntN(3) != 0 {
			acks = append(acks, AckBatch{First: held[i], Last: held[j], Types: types(held[j] - held[i] + 1)})
		}
		i = j + 1
	}
	if len(acks) == 0 {
		acks = append(acks, AckBatch{First: held[0], Last: held[0], Types: []AckType{AckAccept}})
	}
	if rng.IntN(15) == 0 { // a malformed request
		acks[0].Types = append(acks[0].Types, AckAccept, AckAccept)
	}
	return acks
}

func joinLast(lines []string, n int) string {
	s := ""
	for _, l := range lines[max(0, len(lines)-n):] {
		s += "  " + l + "\n"
	}
	return s
}

func dumpRanges(p *Partition) string {
	s := fmt.Sprintf("  spso=%d speo=%d\n", p.SPSO(), p.SPEO())
	for _, r := range p.Ranges() {
		s += fmt.Sprintf("  %d-%d %v n=%d %s\n", r.First, r.Last, r.State, r.DeliveryCount, r.Member)
	}
	return s
}
