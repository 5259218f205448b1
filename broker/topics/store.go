package topics

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/shoal-mq/shoal/broker/meta"
)

// store reads and writes the topic records in the metadata store (keys
// meta.PrefixTopic and meta.PrefixDeletingTopic), each write durable
// (SyncWrites) before it returns.
type store struct{ *meta.Store }

// record is the durable description of a topic.
type record struct {
	Name       string            `json:"name"`
	ID         [16]byte          `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

func (m store) putTopic(t record) error {
	v, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return m.DB().Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(meta.PrefixTopic+t.Name), v)
	})
}

// dropTopic removes the topic record of name and nothing else: a
// creation undone before anything could refer to the topic.
func (m store) dropTopic(name string) error {
	return m.DB().Update(func(txn *badger.Txn) error {
		return txn.Delete([]byte(meta.PrefixTopic + name))
	})
}

// deleteTopic removes the topic record of name and, in the same
// transaction, records that its group offsets and share-group state (by
// id) are still to be removed: finishTopicDeletion clears that, and a
// start-up after a crash in between finishes it (admin.go).
func (m store) deleteTopic(name string, id [16]byte) error {
	return m.DB().Update(func(txn *badger.Txn) error {
		if err := txn.Delete([]byte(meta.PrefixTopic + name)); err != nil {
			return err
		}
		v, err := json.Marshal(name)
		if err != nil {
			return err
		}
		return txn.Set(deletingTopicKey(id), v)
	})
}

// seeReplicatedDeletion records that this broker has seen replicated
// topic id's deletion and, in the same transaction, that its clean-up
// is pending (as deleteTopic does); it reports false, writing nothing,
// if it was seen before.
func (m store) seeReplicatedDeletion(name string, id [16]byte) (bool, error) {
	first := false
	err := m.DB().Update(func(txn *badger.Txn) error {
		key := []byte(meta.PrefixClusterDeletedTopic + hex.EncodeToString(id[:]))
		switch _, err := txn.Get(key); {
		case err == nil:
			return nil
		case !errors.Is(err, badger.ErrKeyNotFound):
			return err
		}
		v, err := json.Marshal(name)
		if err != nil {
			return err
		}
		if err := txn.Set(key, v); err != nil {
			return err
		}
		first = true
		return txn.Set(deletingTopicKey(id), v)
	})
	return first, err
}

// deletingTopicKey is the key of topic id's pending clean-up record.
func deletingTopicKey(id [16]byte) []byte {
	return []byte(meta.PrefixDeletingTopic + hex.EncodeToString(id[:]))
}

// deletedTopic is a topic deletion whose clean-up has not finished.
type deletedTopic struct {
	name string
	id   [16]byte
}

// deletingTopics lists the deletions deleteTopic recorded and
// clearTopicDeletion has not cleared.
func (m store) deletingTopics() ([]deletedTopic, error) {
	var out []deletedTopic
	err := meta.ScanJSON(m.DB(), meta.PrefixDeletingTopic, func(idHex string, name string) error {
		d := deletedTopic{name: name}
		raw, err := hex.DecodeString(idHex)
		if err != nil || len(raw) != len(d.id) {
			return fmt.Errorf("topics: bad topic id %q under %s", idHex, meta.PrefixDeletingTopic)
		}
		copy(d.id[:], raw)
		out = append(out, d)
		return nil
	})
	return out, err
}

// clearTopicDeletion records that the clean-up of topic id finished.
func (m store) clearTopicDeletion(id [16]byte) error {
	return m.DB().Update(func(txn *badger.Txn) error {
		return txn.Delete(deletingTopicKey(id))
	})
}

func (m store) topics() ([]record, error) {
	var out []record
	err := meta.ScanJSON(m.DB(), meta.PrefixTopic, func(_ string, t record) error {
		out = append(out, t)
		return nil
	})
	return out, err
}
