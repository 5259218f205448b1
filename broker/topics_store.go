package broker

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/meta"
)

// metaStore is the metadata store (package meta) with the records of the
// packages that are not yet their own: topics here, groups' offsets and
// their deletion marks in groups_store.go. They move to their owners as
// those become packages (docs: broker/doc.go).
type metaStore struct {
	*meta.Store
	// marks are the offset keys holding a deletion mark
	// (groups_store.go), so that dropping them costs nothing when there
	// are none.
	marks struct {
		sync.Mutex
		keys map[string]struct{}
	}
}

// openMeta opens the metadata store under dataDir.
func openMeta(dataDir string, lg *zap.Logger) (*metaStore, error) {
	s, err := meta.Open(dataDir, lg)
	if err != nil {
		return nil, err
	}
	return &metaStore{Store: s}, nil
}

// topicRecord is the durable description of a topic.
type topicRecord struct {
	Name       string            `json:"name"`
	ID         [16]byte          `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

func (m *metaStore) putTopic(t topicRecord) error {
	v, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return m.DB().Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(meta.PrefixTopic+t.Name), v)
	})
}

// deleteTopic removes the topic record of name and, in the same
// transaction, records that its group offsets and share-group state (by
// id) are still to be removed: finishTopicDeletion clears that, and a
// start-up after a crash in between finishes it (topics.go).
func (m *metaStore) deleteTopic(name string, id [16]byte) error {
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
func (m *metaStore) deletingTopics() ([]deletedTopic, error) {
	var out []deletedTopic
	err := meta.ScanJSON(m.DB(), meta.PrefixDeletingTopic, func(idHex string, name string) error {
		d := deletedTopic{name: name}
		raw, err := hex.DecodeString(idHex)
		if err != nil || len(raw) != len(d.id) {
			return fmt.Errorf("broker: bad topic id %q under %s", idHex, meta.PrefixDeletingTopic)
		}
		copy(d.id[:], raw)
		out = append(out, d)
		return nil
	})
	return out, err
}

// clearTopicDeletion records that the clean-up of topic id finished.
func (m *metaStore) clearTopicDeletion(id [16]byte) error {
	return m.DB().Update(func(txn *badger.Txn) error {
		return txn.Delete(deletingTopicKey(id))
	})
}

func (m *metaStore) topics() ([]topicRecord, error) {
	var out []topicRecord
	err := meta.ScanJSON(m.DB(), meta.PrefixTopic, func(_ string, t topicRecord) error {
		out = append(out, t)
		return nil
	})
	return out, err
}
