package groups

// Durable group state in the metadata store (badger, SyncWrites on).
//
// Two kinds of keys (declared in broker/meta/store.go):
//
//	meta/group/<group>                       groupRecord, JSON
//	meta/offset/<group>/<topic>/<partition>  offset value, binary
//
// <group> is url.PathEscape'd, so a group id containing "/" cannot reach
// another group's keys; topic names never contain "/". A group record is
// written when a rebalance completes (the leader's SyncGroup, before any
// member gets its assignment), when the group becomes empty, and when a
// static member is replaced without a rebalance. It holds what a restart
// needs to let members carry on without rejoining: generation, protocol,
// leader, and each member's protocols and assignment, as Kafka's
// GroupMetadata record does. Members come back with a fresh session and
// must heartbeat within it.
//
// The offset value (badger checksums values; the version byte allows a
// later format):
//
//	+---------+----------+--------------+-------------+-------------+----------+----------+
//	| ver     | offset   | leader epoch | commit (ms) | expire (ms) | stamp    | metadata |
//	| 1 byte  | int64 BE | int32 BE     | int64 BE    | int64 BE    | uint64   | rest     |
//	+---------+----------+--------------+-------------+-------------+----------+----------+
//
// expire is -1 unless the commit (v2-v4) carried its own retention.
// Version 1 (a plain commit) has no stamp; version 2 (an offset a
// transaction committed) has its TxnOffsetCommit's stamp (txn_offsets.go).
// A binary older than version 2 refuses to start on it.
// An offset commit is one badger transaction, split only when it is too
// large for one (thousands of partitions with large metadata).

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/meta"
)

// metaStore is the metadata store (package meta) with the groups'
// records: their metadata, their offsets and the offsets' deletion marks.
type metaStore struct {
	*meta.Store
	// marks are the offset keys holding a deletion mark, so that
	// dropping them costs nothing when there are none.
	marks struct {
		sync.Mutex
		keys map[string]struct{}
	}
}

// errCorruptGroupState marks a group or offset record that does not
// decode; Start fails with it rather than silently dropping offsets.
var errCorruptGroupState = errors.New("broker: corrupt group state")

type groupRecord struct {
	// Consumer holds a KIP-848 consumer group's state; nil for a
	// classic group.
	Consumer     *consumerRecord `json:"consumer,omitempty"`
	ProtocolType string          `json:"protocol_type,omitempty"`
	Protocol     string          `json:"protocol,omitempty"`
	Generation   int32           `json:"generation"`
	Leader       string          `json:"leader,omitempty"`
	StateTimeMs  int64           `json:"state_time_ms"`
	Members      []memberRecord  `json:"members,omitempty"`
}

type memberRecord struct {
	ID                 string           `json:"id"`
	InstanceID         *string          `json:"instance_id,omitempty"`
	ClientID           string           `json:"client_id"`
	ClientHost         string           `json:"client_host"`
	SessionTimeoutMs   int64            `json:"session_timeout_ms"`
	RebalanceTimeoutMs int64            `json:"rebalance_timeout_ms"`
	ProtocolType       string           `json:"protocol_type"`
	Protocols          []protocolRecord `json:"protocols"`
	Assignment         []byte           `json:"assignment"`
}

type consumerRecord struct {
	Epoch           int32                  `json:"epoch"`
	AssignmentEpoch int32                  `json:"assignment_epoch"`
	Assignor        string                 `json:"assignor"`
	Members         []consumerMemberRecord `json:"members,omitempty"`
}

type consumerMemberRecord struct {
	ID                 string        `json:"id"`
	InstanceID         *string       `json:"instance_id,omitempty"`
	RackID             *string       `json:"rack_id,omitempty"`
	ClientID           string        `json:"client_id"`
	ClientHost         string        `json:"client_host"`
	RebalanceTimeoutMs int64         `json:"rebalance_timeout_ms"`
	Topics             []string      `json:"topics,omitempty"`
	Regex              string        `json:"regex,omitempty"`
	Assignor           string        `json:"assignor,omitempty"`
	Epoch              int32         `json:"epoch"`
	PrevEpoch          int32         `json:"prev_epoch"`
	State              memberState   `json:"state"`
	Assigned           []partsRecord `json:"assigned,omitempty"`
	PendingRevoke      []partsRecord `json:"pending_revoke,omitempty"`
	Target             []partsRecord `json:"target,omitempty"`
	// Principal and IP are the last heartbeat's, for the ACLs a regex
	// subscription is resolved with (empty in records from before them:
	// User:ANONYMOUS until the member's next heartbeat).
	Principal string `json:"principal,omitempty"`
	IP        string `json:"ip,omitempty"`
}

// partsRecord is one topic of a partSet; Epochs parallels Partitions.
type partsRecord struct {
	TopicID    [16]byte `json:"topic_id"`
	Partitions []int32  `json:"partitions"`
	Epochs     []int32  `json:"epochs"`
}

func partsToRecord(s partSet) []partsRecord {
	var out []partsRecord
	for _, ip := range s.sorted() {
		r := partsRecord{TopicID: ip.id, Partitions: ip.parts}
		for _, p := range ip.parts {
			r.Epochs = append(r.Epochs, s[ip.id][p])
		}
		out = append(out, r)
	}
	return out
}

func partsFromRecord(rs []partsRecord) partSet {
	s := partSet{}
	for _, r := range rs {
		for i, p := range r.Partitions {
			var e int32
			if i < len(r.Epochs) {
				e = r.Epochs[i]
			}
			s.add(r.TopicID, p, e)
		}
	}
	return s
}

func (cg *consumerGroup) record() *consumerRecord {
	rec := &consumerRecord{Epoch: cg.epoch, AssignmentEpoch: cg.assignmentEpoch, Assignor: cg.assignor}
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := cg.members[id]
		rec.Members = append(rec.Members, consumerMemberRecord{
			ID: m.id, InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
			RebalanceTimeoutMs: m.rebalanceTimeout.Milliseconds(), Topics: m.topics, Regex: m.regex, Assignor: m.assignor,
			Epoch: m.epoch, PrevEpoch: m.prevEpoch, State: m.state,
			Assigned: partsToRecord(m.assigned), PendingRevoke: partsToRecord(m.pendingRevoke), Target: partsToRecord(m.target),
			Principal: m.principal, IP: m.ip,
		})
	}
	return rec
}

// consumerGroupFromRecord rebuilds a consumer group; members get a fresh
// session starting at now.
func consumerGroupFromRecord(rec *consumerRecord, now time.Time) *consumerGroup {
	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch, cg.assignor = rec.Epoch, rec.AssignmentEpoch, rec.Assignor
	for _, mr := range rec.Members {
		m := &consumerMember{
			id: mr.ID, instanceID: mr.InstanceID, rackID: mr.RackID, clientID: mr.ClientID, clientHost: mr.ClientHost,
			rebalanceTimeout: time.Duration(mr.RebalanceTimeoutMs) * time.Millisecond,
			topics:           mr.Topics, regex: mr.Regex, re: compileSubscription(mr.Regex), assignor: mr.Assignor,
			epoch: mr.Epoch, prevEpoch: mr.PrevEpoch, state: mr.State,
			assigned: partsFromRecord(mr.Assigned), pendingRevoke: partsFromRecord(mr.PendingRevoke), target: partsFromRecord(mr.Target),
			lastHeartbeat: now, principal: mr.Principal, ip: mr.IP,
		}
		if m.principal == "" {
			m.principal = "User:ANONYMOUS"
		}
		if m.state == memberUnrevoked {
			m.revokeDeadline = now.Add(m.rebalanceTimeout)
		}
		cg.members[m.id] = m
		if m.instanceID != nil {
			cg.static[*m.instanceID] = m.id
		}
		cg.setOwners(m)
	}
	return cg
}

type protocolRecord struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

type offsetWrite struct {
	tp TP
	oc OffsetCommit
}

func GroupKey(group string) []byte { return []byte(meta.PrefixGroup + url.PathEscape(group)) }

func offsetGroupPrefix(group string) string { return meta.PrefixOffset + url.PathEscape(group) + "/" }

func OffsetKey(group string, tp TP) []byte {
	return []byte(offsetGroupPrefix(group) + tp.Topic + "/" + strconv.Itoa(int(tp.Partition)))
}

// parseOffsetKey splits meta/offset/<group>/<topic>/<partition>.
func parseOffsetKey(k string) (string, TP, bool) {
	rest, ok := strings.CutPrefix(k, meta.PrefixOffset)
	if !ok {
		return "", TP{}, false
	}
	i := strings.IndexByte(rest, '/')
	j := strings.LastIndexByte(rest, '/')
	if i < 0 || j <= i {
		return "", TP{}, false
	}
	group, err := url.PathUnescape(rest[:i])
	if err != nil {
		return "", TP{}, false
	}
	p, err := strconv.ParseInt(rest[j+1:], 10, 32)
	if err != nil {
		return "", TP{}, false
	}
	return group, TP{Topic: rest[i+1 : j], Partition: int32(p)}, true
}

// encodeOffset encodes a committed offset: version 1 for a plain commit,
// version 2 (the stamp after the fixed fields) for one a transaction
// made.
func encodeOffset(oc OffsetCommit) []byte {
	n := 29
	if oc.Stamp != 0 {
		n += 8
	}
	b := make([]byte, n, n+len(oc.Metadata))
	b[0] = 1
	if oc.Stamp != 0 {
		b[0] = 2
		binary.BigEndian.PutUint64(b[29:], oc.Stamp)
	}
	binary.BigEndian.PutUint64(b[1:], uint64(oc.Offset))
	binary.BigEndian.PutUint32(b[9:], uint32(oc.LeaderEpoch))
	binary.BigEndian.PutUint64(b[13:], uint64(oc.CommitTime.UnixMilli()))
	exp := int64(-1)
	if !oc.expireTime.IsZero() {
		exp = oc.expireTime.UnixMilli()
	}
	binary.BigEndian.PutUint64(b[21:], uint64(exp))
	return append(b, oc.Metadata...)
}

func decodeOffset(b []byte) (OffsetCommit, error) {
	if bytes.Equal(b, deletionMark) {
		return OffsetCommit{}, errOffsetDeleted
	}
	n := 29
	if firstByte(b) == 2 {
		n += 8
	}
	if len(b) < n || b[0] != 1 && b[0] != 2 {
		return OffsetCommit{}, fmt.Errorf("%w: offset value of %d bytes, version %d", errCorruptGroupState, len(b), firstByte(b))
	}
	oc := OffsetCommit{
		Offset:      int64(binary.BigEndian.Uint64(b[1:])),
		LeaderEpoch: int32(binary.BigEndian.Uint32(b[9:])),
		CommitTime:  time.UnixMilli(int64(binary.BigEndian.Uint64(b[13:]))),
		Metadata:    string(b[n:]),
	}
	if n > 29 {
		oc.Stamp = binary.BigEndian.Uint64(b[29:])
	}
	if exp := int64(binary.BigEndian.Uint64(b[21:])); exp >= 0 {
		oc.expireTime = time.UnixMilli(exp)
	}
	return oc, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// batchUpdate runs the operations in as few transactions as badger
// allows: normally one; a transaction that grows too big is committed
// and a new one started.
func (m *metaStore) batchUpdate(ops []func(txn *badger.Txn) error) error {
	txn := m.DB().NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, op := range ops {
		err := op(txn)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err != nil {
				return err
			}
			txn = m.DB().NewTransaction(true)
			err = op(txn)
		}
		if err != nil {
			return err
		}
	}
	return txn.Commit()
}

// errOffsetDeleted is decodeOffset's answer for a deletion mark.
var errOffsetDeleted = errors.New("broker: offset deleted")

// deletionMark is the value of an offset deleted while an open
// transaction holds a pending offset for it (value version 3, nothing
// else). A badger deletion would tell the transaction's commit that the
// deletion came after its TxnOffsetCommit only until compaction drops
// it; the mark stays (applyTxnOffsets reads its version). It reads as no
// offset, and is removed once nothing is pending for the partition
// (dropDeletionMarks).
var deletionMark = []byte{3}

// putOffsets writes and deletes committed offsets of one group; mark
// deletes with a deletion mark.
func (m *metaStore) putOffsets(group string, set []offsetWrite, del, mark []TP) error {
	ops := make([]func(*badger.Txn) error, 0, len(set)+len(del)+len(mark))
	for _, w := range set {
		k, v := OffsetKey(group, w.tp), encodeOffset(w.oc)
		ops = append(ops, func(txn *badger.Txn) error { return txn.Set(k, v) })
	}
	for _, tp := range del {
		k := OffsetKey(group, tp)
		ops = append(ops, func(txn *badger.Txn) error { return txn.Delete(k) })
	}
	return m.updateMarking(ops, group, mark)
}

// updateMarking runs ops, plus deletion marks for group's tps, as
// batchUpdate does, and records the marked keys.
func (m *metaStore) updateMarking(ops []func(*badger.Txn) error, group string, tps []TP) error {
	for _, tp := range tps {
		k := OffsetKey(group, tp)
		ops = append(ops, func(txn *badger.Txn) error { return txn.Set(k, deletionMark) })
	}
	if err := m.batchUpdate(ops); err != nil {
		return err
	}
	for _, tp := range tps {
		m.noteMark(OffsetKey(group, tp))
	}
	return nil
}

func (m *metaStore) noteMark(key []byte) {
	m.marks.Lock()
	defer m.marks.Unlock()
	if m.marks.keys == nil {
		m.marks.keys = map[string]struct{}{}
	}
	m.marks.keys[string(key)] = struct{}{}
}

// dropDeletionMarks removes the deletion marks of group's tps, called
// once nothing is pending for them, under the group's lock
// (groupCoordinator.dropDeletionMarks), and the group's own (deleteGroup)
// with group too, once nothing at all is pending for it. A key written
// since (a commit, a group record) is left alone; a failure leaves the
// mark, which reads as no offset (no group).
func (m *metaStore) dropDeletionMarks(group string, tps []TP, withGroup bool) {
	keys := make([][]byte, 0, len(tps)+1)
	for _, tp := range tps {
		keys = append(keys, OffsetKey(group, tp))
	}
	if withGroup {
		keys = append(keys, GroupKey(group))
	}
	for _, k := range keys {
		m.marks.Lock()
		_, ok := m.marks.keys[string(k)]
		m.marks.Unlock()
		if !ok {
			continue
		}
		err := m.DB().Update(func(txn *badger.Txn) error {
			item, err := txn.Get(k)
			if err != nil {
				return err
			}
			if mark, err := isDeletionMark(item); err != nil || !mark {
				return err
			}
			return txn.Delete(k)
		})
		if err == nil || errors.Is(err, badger.ErrKeyNotFound) || errors.Is(err, badger.ErrConflict) {
			m.marks.Lock()
			delete(m.marks.keys, string(k))
			m.marks.Unlock()
		}
	}
}

func (m *metaStore) putGroup(group string, rec *groupRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return m.DB().Update(func(txn *badger.Txn) error { return txn.Set(GroupKey(group), v) })
}

// deleteGroup removes a group's record and all its offsets. Partitions
// pending (an open transaction's offsets, which then are not applied:
// applyTxnOffsets) get a deletion mark instead.
func (m *metaStore) deleteGroup(group string, pending []TP) error {
	var keys [][]byte
	err := m.DB().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(offsetGroupPrefix(group))})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil {
		return err
	}
	marked := map[string]bool{}
	for _, tp := range pending {
		marked[string(OffsetKey(group, tp))] = true
	}
	ops := make([]func(*badger.Txn) error, 0, len(keys)+len(pending)+1)
	for _, k := range keys {
		if !marked[string(k)] {
			ops = append(ops, func(txn *badger.Txn) error { return txn.Delete(k) })
		}
	}
	gk := GroupKey(group)
	if len(pending) == 0 {
		ops = append(ops, func(txn *badger.Txn) error { return txn.Delete(gk) })
		return m.updateMarking(ops, group, nil)
	}
	// An open transaction holds offsets for the group: the group's
	// deletion is marked too, so that a restart knows it came after
	// them (txn.Coordinator.loadGroups) although compaction drops badger
	// deletions. OffsetDelete and a deleted topic leave the group.
	ops = append(ops, func(txn *badger.Txn) error { return txn.Set(gk, deletionMark) })
	if err := m.updateMarking(ops, group, pending); err != nil {
		return err
	}
	m.noteMark(gk)
	return nil
}

// DeletedAfter reports whether group's record key holds a deletion
// mark (deleteGroup) written after stamp.
func DeletedAfter(btx *badger.Txn, group string, stamp uint64) (bool, error) {
	item, err := btx.Get(GroupKey(group))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	mark, err := isDeletionMark(item)
	return mark && item.Version() > stamp, err
}

// loadGroups reads every group record and committed offset.
func (m *metaStore) loadGroups() (map[string]*groupRecord, map[string]map[TP]OffsetCommit, error) {
	recs := map[string]*groupRecord{}
	offsets := map[string]map[TP]OffsetCommit{}
	err := m.DB().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(meta.PrefixGroup), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := string(it.Item().Key())
			name, err := url.PathUnescape(strings.TrimPrefix(k, meta.PrefixGroup))
			if err != nil {
				return fmt.Errorf("%w: key %q", errCorruptGroupState, k)
			}
			rec := &groupRecord{}
			deleted := false
			if err := it.Item().Value(func(v []byte) error {
				if deleted = bytes.Equal(v, deletionMark); deleted {
					return nil
				}
				return json.Unmarshal(v, rec)
			}); err != nil {
				return fmt.Errorf("%w: %s: %v", errCorruptGroupState, k, err)
			}
			if deleted { // deleteGroup's mark: no group
				m.noteMark(it.Item().KeyCopy(nil))
				continue
			}
			recs[name] = rec
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	err = m.DB().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(meta.PrefixOffset), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := string(it.Item().Key())
			group, tp, ok := parseOffsetKey(k)
			if !ok {
				return fmt.Errorf("%w: key %q", errCorruptGroupState, k)
			}
			var oc OffsetCommit
			err := it.Item().Value(func(v []byte) error {
				var err error
				oc, err = decodeOffset(v)
				return err
			})
			if errors.Is(err, errOffsetDeleted) {
				m.noteMark(it.Item().KeyCopy(nil))
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			if offsets[group] == nil {
				offsets[group] = map[TP]OffsetCommit{}
			}
			offsets[group][tp] = oc
		}
		return nil
	})
	return recs, offsets, err
}

// persistLocked writes the group record for the group's current state.
// g.mu held; this is the group's own I/O.
func (g *Group) persistLocked(now time.Time) error {
	rec := &groupRecord{
		ProtocolType: g.mu.protocolType,
		Protocol:     g.mu.protocol,
		Generation:   g.mu.generation,
		Leader:       g.mu.leader,
		StateTimeMs:  g.mu.stateTime.UnixMilli(),
	}
	if g.mu.cg != nil {
		rec.Consumer = g.mu.cg.record()
	}
	if g.mu.state != groupEmpty {
		for _, m := range g.sortedMembersLocked() {
			mr := memberRecord{
				ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
				SessionTimeoutMs: m.sessionTimeout.Milliseconds(), RebalanceTimeoutMs: m.rebalanceTimeout.Milliseconds(),
				ProtocolType: m.protocolType, Assignment: m.assignment,
			}
			for _, p := range m.protocols {
				mr.Protocols = append(mr.Protocols, protocolRecord{Name: p.Name, Metadata: p.Metadata})
			}
			rec.Members = append(rec.Members, mr)
		}
	}
	if err := g.c.store.putGroup(g.name, rec); err != nil {
		return err
	}
	g.mu.persisted = true
	return nil
}

// LoadTxnGroup makes, at start, a group an open transaction's offsets
// name if nothing else made it: an empty classic group without protocol
// type, as a simple committer's (txn.Coordinator.loadGroups).
func (c *Coordinator) LoadTxnGroup(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.groups[name] == nil {
		c.mu.groups[name] = c.newGroup(name)
	}
}

// Load rebuilds every group from the store. Groups with members come back
// Stable at their stored generation, each member with a fresh session.
// Called by Start before the listener accepts connections.
func (c *Coordinator) Load() error {
	recs, offsets, err := c.store.loadGroups()
	if err != nil {
		return err
	}
	now := time.Now()
	for name, rec := range recs {
		g := c.newGroup(name)
		g.mu.persisted = true
		g.mu.protocolType, g.mu.protocol = rec.ProtocolType, rec.Protocol
		g.mu.generation, g.mu.leader = rec.Generation, rec.Leader
		g.mu.stateTime = time.UnixMilli(rec.StateTimeMs)
		for _, mr := range rec.Members {
			g.mu.joinSeq++
			m := &groupMember{
				id: mr.ID, instanceID: mr.InstanceID, clientID: mr.ClientID, clientHost: mr.ClientHost,
				protocolType:     mr.ProtocolType,
				sessionTimeout:   time.Duration(mr.SessionTimeoutMs) * time.Millisecond,
				rebalanceTimeout: time.Duration(mr.RebalanceTimeoutMs) * time.Millisecond,
				assignment:       mr.Assignment,
				lastHeartbeat:    now,
				joinSeq:          g.mu.joinSeq,
			}
			for _, p := range mr.Protocols {
				m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
			}
			g.mu.members[m.id] = m
			if m.instanceID != nil {
				g.mu.static[*m.instanceID] = m.id
			}
		}
		if len(g.mu.members) > 0 {
			g.mu.state = groupStable
		}
		if rec.Consumer != nil {
			g.mu.cg = consumerGroupFromRecord(rec.Consumer, now)
			for _, m := range g.mu.cg.members {
				c.bindDescribe(m)
			}
			// Topics were loaded first: resolve the subscriptions as
			// they are now, without a new epoch; if a member's target
			// reaches outside them (a topic deleted, an ACL revoked
			// while we were down), the next check bumps the epoch.
			g.refreshConsumerMetadataLocked(now)
			g.mu.cg.recheck = g.mu.cg.targetsOutsideReach()
		}
		c.mu.groups[name] = g
	}
	for name, ocs := range offsets {
		g := c.mu.groups[name]
		if g == nil {
			g = c.newGroup(name) // a group with simple commits only
			c.mu.groups[name] = g
		}
		g.mu.offsets = ocs
	}
	for _, g := range c.mu.groups {
		g.mu.Lock()
		g.unlock(now)
	}
	c.lg.Info("loaded groups", zap.Int("groups", len(c.mu.groups)), zap.Int("with_offsets", len(offsets)))
	return nil
}
