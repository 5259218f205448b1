package cluster

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Broker is a registered broker: its Kafka endpoint, for Metadata.
type Broker struct {
	ID   uint64 `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
}

// Topic is a topic and the replicas of each partition (the first one
// is the preferred leader, as in Kafka), with its config overrides
// (Kafka's topic configs: retention.ms, min.insync.replicas, ...).
// ConfigVersion counts the changes of Configs since the topic was
// created: a change names the version it read (record.Expect), so two
// brokers' read-modify-writes cannot lose one of them.
type Topic struct {
	Name          string            `json:"name"`
	ID            [16]byte          `json:"id"`
	Partitions    [][]uint64        `json:"partitions"`
	Configs       map[string]string `json:"configs,omitempty"`
	ConfigVersion uint64            `json:"config_version,omitempty"`
}

// PartitionState is what a partition's leader last published of its
// group (a "partition_state" record): itself, its term (the leader
// epoch) and the replicas in sync with it (replica.Replica.InSync),
// for brokers to report leaders and ISR as Kafka's metadata does.
// Leadership itself is the partition group's: this is a report of it,
// which may lag, never an input to raft.
type PartitionState struct {
	Partition string `json:"partition"` // the group's name, <topic>-<index>
	// TopicID is the topic's incarnation: a report of a deleted topic's
	// group (proposed before its deletion, committed after) is ignored,
	// whether or not a topic of the same name exists again. Zero in
	// records written before topics could be deleted.
	TopicID [16]byte `json:"topic_id,omitzero"`
	Leader  uint64   `json:"leader"`
	Term    uint64   `json:"term"`
	ISR     []uint64 `json:"isr"`
}

// same reports whether ps and o report the same leadership and ISR.
func (ps PartitionState) same(o PartitionState) bool {
	return ps.Partition == o.Partition && ps.TopicID == o.TopicID && ps.Leader == o.Leader && ps.Term == o.Term && slices.Equal(ps.ISR, o.ISR)
}

// Image is the applied state of the metadata log.
type Image struct {
	Brokers map[uint64]Broker
	// Fenced are the registered brokers the metadata group's leader has
	// not heard from within broker.session.timeout.ms (a "fence" record
	// names them all), until they register again.
	Fenced map[uint64]bool
	Topics map[string]*Topic
	// Partitions are the partition states published, by group name.
	Partitions map[string]PartitionState
	// results are the outcomes of applied requests by request id (an
	// empty string: it succeeded), for proposers and retries.
	results map[string]string
	// Applied is the index of the last applied metadata entry.
	Applied uint64
}

func newImage() *Image {
	return &Image{Brokers: map[uint64]Broker{}, Fenced: map[uint64]bool{}, Topics: map[string]*Topic{}, Partitions: map[string]PartitionState{},
		results: map[string]string{}}
}

// clone copies the image for readers outside the lock.
func (im *Image) clone() Image {
	c := Image{Brokers: make(map[uint64]Broker, len(im.Brokers)), Fenced: maps.Clone(im.Fenced), Topics: make(map[string]*Topic, len(im.Topics)),
		Partitions: make(map[string]PartitionState, len(im.Partitions)), Applied: im.Applied}
	for n, ps := range im.Partitions {
		c.Partitions[n] = ps // ISR slices are never changed in place
	}
	for id, b := range im.Brokers {
		c.Brokers[id] = b
	}
	for n, t := range im.Topics {
		c.Topics[n] = t // topics are never changed in place
	}
	return c
}

// BrokerIDs returns the registered brokers' ids, ascending.
func (im *Image) BrokerIDs() []uint64 {
	ids := make([]uint64, 0, len(im.Brokers))
	for id := range im.Brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// FencedIDs returns the fenced brokers' ids, ascending.
func (im *Image) FencedIDs() []uint64 {
	ids := make([]uint64, 0, len(im.Fenced))
	for id := range im.Fenced {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// record is one metadata log entry.
type record struct {
	Op        string          `json:"op"` // "register", "create_topic", "create_partitions", "topic_configs", "delete_topic", "partition_state", "fence", "elect_preferred"
	Request   string          `json:"req,omitempty"`
	Broker    *Broker         `json:"broker,omitempty"`
	Topic     *Topic          `json:"topic,omitempty"`
	Partition *PartitionState `json:"partition,omitempty"`
	// Expect is a topic_configs record's ConfigVersion as its proposer
	// read it: applied only if the topic is still at that version.
	Expect uint64 `json:"expect,omitempty"`
	// Fenced is a fence record's brokers: all that are fenced now.
	Fenced []uint64 `json:"fenced,omitempty"`
	// Elect is an elect_preferred record's request (elect.go).
	Elect *electRequest `json:"elect,omitempty"`
}

// Errors a create's outcome may carry (Kafka's names).
const (
	errTopicExists  = "TOPIC_ALREADY_EXISTS"
	errUnknownTopic = "UNKNOWN_TOPIC_OR_PARTITION"
	errBadRecord    = "INVALID_REQUEST"
	// errConfigConflict: a topic_configs record read an older version
	// than the topic's (another change came first); its proposer reads
	// again and retries.
	errConfigConflict = "CONFIG_VERSION_CONFLICT"
	// errPartitionsConflict: the topic's partition count changed since
	// the added partitions were placed.
	errPartitionsConflict = "PARTITION_COUNT_CONFLICT"
)

// apply applies one committed record; it returns the outcome recorded
// for its request ("" when it succeeded) and the topic it created, the
// one whose configs it changed, or the one it deleted, if any.
// Deterministic: every broker applies the same records in the same
// order to the same image.
func (im *Image) apply(index uint64, body []byte) (outcome string, created, reconfigured, deleted *Topic) {
	im.Applied = index
	var r record
	if err := json.Unmarshal(body, &r); err != nil {
		return errBadRecord, nil, nil, nil
	}
	if prev, ok := im.results[r.Request]; ok && r.Request != "" {
		return prev, nil, nil, nil // a retried proposal: the first one's outcome
	}
	defer func() {
		if r.Request != "" {
			im.results[r.Request] = outcome
		}
	}()
	switch {
	case r.Op == "register" && r.Broker != nil:
		im.Brokers[r.Broker.ID] = *r.Broker
		delete(im.Fenced, r.Broker.ID) // it is back
		return "", nil, nil, nil
	case r.Op == "fence":
		clear(im.Fenced)
		for _, id := range r.Fenced {
			if _, ok := im.Brokers[id]; ok {
				im.Fenced[id] = true
			}
		}
		return "", nil, nil, nil
	case r.Op == "create_topic" && r.Topic != nil && validTopic(r.Topic):
		if r.Topic.Name == MetadataTopic {
			return errBadRecord, nil, nil, nil // its partition 0 would be the metadata group
		}
		if _, ok := im.Topics[r.Topic.Name]; ok {
			return errTopicExists, nil, nil, nil
		}
		t := *r.Topic
		t.ConfigVersion = 0
		im.Topics[t.Name] = &t
		return "", &t, nil, nil
	case r.Op == "create_partitions" && r.Topic != nil && validTopic(r.Topic):
		// r.Topic.Partitions are the partitions to add, placed; Expect
		// the count they were placed after.
		cur, ok := im.Topics[r.Topic.Name]
		switch {
		case !ok:
			return errUnknownTopic, nil, nil, nil
		case uint64(len(cur.Partitions)) != r.Expect:
			return errPartitionsConflict, nil, nil, nil
		}
		for _, rs := range r.Topic.Partitions { // every broker would start these groups: refuse a bad list outright
			for i, id := range rs {
				if _, known := im.Brokers[id]; !known || slices.Contains(rs[:i], id) || len(rs) != len(cur.Partitions[0]) {
					return errBadRecord, nil, nil, nil
				}
			}
		}
		t := *cur // never changed in place
		t.Partitions = append(slices.Clone(cur.Partitions), r.Topic.Partitions...)
		im.Topics[t.Name] = &t
		return "", &t, nil, nil
	case r.Op == "topic_configs" && r.Topic != nil:
		cur, ok := im.Topics[r.Topic.Name]
		switch {
		case !ok:
			return errUnknownTopic, nil, nil, nil
		case cur.ConfigVersion != r.Expect:
			return errConfigConflict, nil, nil, nil
		}
		t := *cur // topics are never changed in place (clone)
		t.Configs = r.Topic.Configs
		t.ConfigVersion++
		im.Topics[t.Name] = &t
		return "", nil, &t, nil
	case r.Op == "delete_topic" && r.Topic != nil:
		// By name and id: a deletion proposed for a topic since deleted
		// and created again under its name does not delete the new one.
		cur, ok := im.Topics[r.Topic.Name]
		if !ok || cur.ID != r.Topic.ID {
			return errUnknownTopic, nil, nil, nil
		}
		delete(im.Topics, cur.Name)
		for i := range cur.Partitions {
			delete(im.Partitions, PartitionName(cur.Name, int32(i)))
		}
		return "", nil, nil, cur
	case r.Op == "elect_preferred" && r.Elect != nil:
		// An instruction to the partitions' leaders (Node.applyElect),
		// not state: the image does not change.
		return "", nil, nil, nil
	case r.Op == "partition_state" && r.Partition != nil && r.Partition.Partition != "" && r.Partition.Leader != 0:
		if t := im.topicOf(r.Partition.Partition); t == nil || r.Partition.TopicID != ([16]byte{}) && r.Partition.TopicID != t.ID {
			return "", nil, nil, nil // a deleted topic's group's report
		}
		// A newer term's report wins, and a later one of the same
		// leader and term; an older one (delayed) is ignored.
		ps, cur := *r.Partition, im.Partitions[r.Partition.Partition]
		if ps.Term > cur.Term || ps.Term == cur.Term && ps.Leader == cur.Leader {
			im.Partitions[ps.Partition] = ps
		}
		return "", nil, nil, nil
	}
	return errBadRecord, nil, nil, nil
}

// topicOf returns the topic of partition group name (<topic>-<index>),
// nil if there is none or the index is past its partitions.
func (im *Image) topicOf(name string) *Topic {
	t, _ := im.partitionOf(name)
	return t
}

// partitionOf is topicOf with the partition's index.
func (im *Image) partitionOf(name string) (*Topic, int) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return nil, 0
	}
	idx, err := strconv.Atoi(name[i+1:])
	t := im.Topics[name[:i]]
	if err != nil || t == nil || idx < 0 || idx >= len(t.Partitions) {
		return nil, 0
	}
	return t, idx
}

func validTopic(t *Topic) bool {
	if t.Name == "" || len(t.Partitions) == 0 {
		return false
	}
	for _, rs := range t.Partitions {
		if len(rs) == 0 {
			return false
		}
	}
	return true
}

// place assigns replicas to the partitions of a new topic: rf brokers
// each, consecutive in id order from a start that depends on the topic
// name and the partition, so leaders spread over the brokers.
func place(brokers []uint64, name string, partitions, rf int) ([][]uint64, error) {
	if rf < 1 || rf > len(brokers) {
		return nil, fmt.Errorf("replication factor %d with %d brokers", rf, len(brokers))
	}
	sort.Slice(brokers, func(i, j int) bool { return brokers[i] < brokers[j] })
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	start := int(h.Sum32() % uint32(len(brokers)))
	out := make([][]uint64, partitions)
	for p := range out {
		for k := range rf {
			out[p] = append(out[p], brokers[(start+p+k)%len(brokers)])
		}
	}
	return out, nil
}
