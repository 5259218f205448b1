package share

// Share sessions (kip932.md §4): the set of share-partitions a member
// fetches from this broker, with an epoch, like KIP-227 fetch sessions.
//
// Key (group, member id); at most group.share.max.share.sessions of them
// (SHARE_SESSION_LIMIT_REACHED beyond, never an eviction). Epoch 0 opens
// (replacing any session of the key without releasing its records: they
// belong to the member, not to the session), -1 closes, anything else
// must equal the session's next epoch, which every accepted ShareFetch
// and ShareAcknowledge advances by one (MaxInt32 wraps to 1).
//
// A session remembers the connection that opened it. When that
// connection closes, the session is dropped and the member's acquired
// records on its share-partitions are released without counting a
// delivery (Broker.connClosed → Coordinator.ConnClosed). A session
// replaced by a newer one on another connection is not affected by the
// old connection closing.
//
// Ownership: shareSessionCache.mu guards only the map. shareSession.mu is
// held by the one request using the session, for the whole request
// (including a long poll); removed is atomic so the cache can drop a
// session without waiting for that request.

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shoal-mq/shoal/sharegroup/store"
)

type shareSessionKey struct{ group, member string }

// Client is who sent a share request: the connection it came on
// (an id unique among the broker's connections; the share sessions it
// opened are dropped with it, connClosed), and the client id and host a
// member is described with.
type Client struct {
	Conn uint64
	ID   string
	Host string
}

// shareTP names a partition by topic id, as share requests do.
type shareTP struct {
	topicID   [16]byte
	partition int32
}

type shareSessionPart struct {
	tp shareTP
	// requiresUpdate puts the partition in the next incremental
	// response even without data: it was just added, or its last
	// response carried an error.
	requiresUpdate bool
}

type shareSession struct {
	key     shareSessionKey
	conn    uint64 // shareClient.Conn of the connection that opened it
	removed atomic.Bool

	mu struct {
		sync.Mutex
		epoch int32 // the epoch the next request must carry
		parts []*shareSessionPart
		index map[shareTP]*shareSessionPart
		// blockedSince is when a run of fetches began that acquired
		// nothing, carried no acknowledgement and found the member
		// holding ordered-mode records (ownGroupsWait); zero: none.
		blockedSince time.Time
		// deliveredAt is when the last response with records was built;
		// slow says the member's last acknowledgements came spreadAfter
		// or more after it (spreadHeads).
		deliveredAt time.Time
		slow        bool
	}
}

// spreadAfter is the time from a delivery to the acknowledgement after
// which a member counts as slow: it spends that long processing what it
// holds. A client acknowledging at once comes back within a round trip of
// a millisecond or so.
const spreadAfter = 5 * time.Millisecond

// spreadHeads notes acknowledgements arriving at now and reports whether
// the member is slow (deliveredAt, slow): in ordered mode such a member
// takes at most its share of the message groups' heads while other
// members wait for them (sharegroup.Partition.HeadShare). A member that
// acknowledges at once keeps taking what its acknowledgements free: a few
// large fetches cost less than many small ones, and nobody waits long
// for the heads it holds. A member processing slowly, holding many heads,
// would leave the waiting members idle: spreading them lets every member
// work. Called with mu held.
func (s *shareSession) spreadHeads(now time.Time, acked bool) bool {
	if acked && !s.mu.deliveredAt.IsZero() {
		s.mu.slow = now.Sub(s.mu.deliveredAt) >= spreadAfter
	}
	return s.mu.slow
}

// ownGroupsWait is how long a fetch of this session may long-poll when it
// acquired nothing, while its member holds ordered-mode records that only
// its own acknowledgements can free (sharePart.blocksOwnGroups), and
// blocked says whether that is so. franz-go sends acknowledgements only
// with the member's next fetch, so a long poll would hold them back: the
// first such fetch is answered at once. But a member still processing
// what it holds fetches again and again meanwhile (franz-go refetches at
// once after an empty answer), so later fetches of the same run wait a
// quarter of the run's age so far (at least 1 ms, at most maxWait): a
// member busy for 100 ms sends about 20 fetches instead of one per round
// trip, and its acknowledgements, when they come, are late by at most a
// quarter of the time it took. Nor may a wait run into the member's
// earliest lock deadline (lockDeadline), or acknowledgements made in time
// would reach the broker after their records' locks expired: it is at
// most a quarter of the time left until then. Anything else that fetch
// may acquire still wakes it. Acknowledgements, on a fetch (acked) or a
// ShareAcknowledge (ackedLocked), start a new run (a fetch carrying them
// is answered at once: the member may hold more it has not acknowledged
// yet); a fetch that is not blocked ends the run. Called with mu held.
func (s *shareSession) ownGroupsWait(now time.Time, blocked, acked bool, maxWait time.Duration, lockDeadline time.Time) time.Duration {
	switch {
	case !blocked:
		s.mu.blockedSince = time.Time{}
		return maxWait
	case acked || s.mu.blockedSince.IsZero():
		s.mu.blockedSince = now
		return 0
	}
	wait := min(max(now.Sub(s.mu.blockedSince)/4, time.Millisecond), maxWait, lockDeadline.Sub(now)/4)
	return max(wait, 0)
}

// ackedLocked notes acknowledgements sent on their own (ShareAcknowledge):
// the member's next blocked fetch starts a new run (ownGroupsWait). Called
// with mu held.
func (s *shareSession) ackedLocked() { s.mu.blockedSince = time.Time{} }

// addLocked adds tp if it is not in the session yet.
func (s *shareSession) addLocked(tp shareTP) {
	if _, ok := s.mu.index[tp]; ok {
		return
	}
	sp := &shareSessionPart{tp: tp, requiresUpdate: true}
	s.mu.parts = append(s.mu.parts, sp)
	s.mu.index[tp] = sp
}

// forgetLocked removes tp.
func (s *shareSession) forgetLocked(tp shareTP) {
	if _, ok := s.mu.index[tp]; !ok {
		return
	}
	delete(s.mu.index, tp)
	for i, sp := range s.mu.parts {
		if sp.tp == tp {
			s.mu.parts = append(s.mu.parts[:i], s.mu.parts[i+1:]...)
			break
		}
	}
}

func (s *shareSession) partsLocked() []shareTP {
	out := make([]shareTP, len(s.mu.parts))
	for i, sp := range s.mu.parts {
		out[i] = sp.tp
	}
	return out
}

// nextShareEpoch is the epoch after e: +1, MaxInt32 wraps to 1.
func nextShareEpoch(e int32) int32 {
	if e >= 1<<31-1 {
		return 1
	}
	return e + 1
}

type shareSessionCache struct {
	mu sync.Mutex
	m  map[shareSessionKey]*shareSession
}

// open creates a session for key on connection cn, replacing any
// existing one, and returns it locked. limit bounds the number of
// sessions.
func (sc *shareSessionCache) open(key shareSessionKey, cn uint64, limit int) (*shareSession, int16) {
	s := &shareSession{key: key, conn: cn}
	s.mu.index = map[shareTP]*shareSessionPart{}
	s.mu.Lock()
	sc.mu.Lock()
	old := sc.m[key]
	delete(sc.m, key)
	if len(sc.m) >= limit {
		sc.mu.Unlock()
		if old != nil {
			old.removed.Store(true)
		}
		s.mu.Unlock()
		return nil, kerr.ShareSessionLimitReached.Code
	}
	sc.m[key] = s
	sc.mu.Unlock()
	if old != nil {
		old.removed.Store(true)
	}
	return s, 0
}

// get returns the session of key locked, or nil.
func (sc *shareSessionCache) get(key shareSessionKey) *shareSession {
	sc.mu.Lock()
	s := sc.m[key]
	sc.mu.Unlock()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if s.removed.Load() {
		s.mu.Unlock()
		return nil
	}
	return s
}

// remove drops s from the cache if it is still the session of its key.
func (sc *shareSessionCache) remove(s *shareSession) {
	sc.mu.Lock()
	if sc.m[s.key] == s {
		delete(sc.m, s.key)
	}
	sc.mu.Unlock()
	s.removed.Store(true)
}

// count returns the number of sessions (tests, metrics).
func (sc *shareSessionCache) count() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return len(sc.m)
}

// ConnClosed drops the sessions opened on connection cn and releases
// their members' acquired records on the sessions' share-partitions.
func (c *Coordinator) ConnClosed(cn uint64) {
	c.sessions.mu.Lock()
	var gone []*shareSession
	for k, s := range c.sessions.m {
		if s.conn == cn {
			gone = append(gone, s)
			delete(c.sessions.m, k)
		}
	}
	c.sessions.mu.Unlock()
	for _, s := range gone {
		s.removed.Store(true)
		s.mu.Lock() // wait for a request still using it (on another connection)
		tps := s.partsLocked()
		s.mu.Unlock()
		c.releaseMember(s.key.group, s.key.member, tps)
	}
}

// releaseMember releases member's acquired records on the given
// share-partitions of group.
func (c *Coordinator) releaseMember(group, member string, tps []shareTP) {
	now := time.Now()
	seen := make(map[shareTP]bool, len(tps))
	for _, tp := range tps {
		if seen[tp] {
			continue
		}
		seen[tp] = true
		c.mu.Lock()
		sp := c.mu.parts[store.Key{Group: group, TopicID: tp.topicID, Partition: tp.partition}]
		c.mu.Unlock()
		if sp != nil {
			sp.releaseMember(now, member)
		}
	}
}

// checkShareIDs applies the rules ShareFetch and ShareAcknowledge share
// for the group and member ids: both must be set (KIP-932; member ids are
// otherwise opaque). It returns a Kafka error code and message, or 0.
func checkShareIDs(group, member string) (int16, string) {
	switch {
	case strings.TrimSpace(group) == "":
		return kerr.InvalidRequest.Code, "GroupId must be set."
	case strings.TrimSpace(member) == "":
		return kerr.InvalidRequest.Code, "MemberId must be set."
	case strings.ContainsRune(member, 0):
		// NUL is reserved for the broker's internal holders (the
		// redelivery backoff of sharegroup).
		return kerr.InvalidRequest.Code, "MemberId must not contain NUL."
	}
	return 0, ""
}
