package meta

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

// The badger key space. Every key Shoal writes is declared here so that
// no two users of the one database collide (etcd's schema/bucket.go
// does the same). Values are JSON for the rarely written records below;
// badger checksums every value. File names are under broker/.
//
//	meta/cluster-id            string: the cluster id, made on first start
//	meta/topic/<name>          JSON: the topic record (topics/store.go)
//	meta/deleting-topic/<id hex> JSON string: the name of a deleted topic whose group offsets and
//	                           share-group state are still being removed (topics/admin.go); written
//	                           with the topic record's deletion, finished at start-up
//	meta/cluster-deleted-topic/<id hex> JSON string: the name of a replicated topic whose
//	                           deletion (the cluster's metadata log) this broker has seen; a restart
//	                           applying the log again finds it and cleans up nothing twice
//	meta/broker-config/<name>  string: a dynamic broker config override
//	meta/seq/producer-id       badger sequence for InitProducerId
//	meta/group/<group>         groupRecord (groups/store.go); <group> is path-escaped. A group
//	                           deleted while a transaction holds offsets for it keeps the
//	                           deletion mark []byte{3} here until nothing is pending for it
//	                           (a binary older than this refuses to start on it)
//	meta/offset/<group>/<topic>/<partition>
//	                           a committed offset (binary, groups/store.go)
//	meta/share-group/<group>   shareGroupRecord (share/groups.go); <group> is path-escaped
//	meta/group-config/<group>  JSON map of group config overrides (share/configs.go); path-escaped
//	meta/dlq/pending/<group>/<topic id hex>/<partition>
//	                           JSON dlqIntent: a dead-letter write in progress (share/dlq.go)
//	meta/dlq/count/<group>/<topic id hex>/<partition>
//	                           uint64 big-endian: dead-letter records written (share/dlq.go)
//	meta/txn/<transactional id> txn.Record (package txn), JSON; path-escaped
//	meta/client-quota/<entity> JSON map of client quota values (quota/quota.go); <entity> is
//	                           type=name parts joined by '&', names query-escaped
//	meta/acl/<type>/<pattern>/<name>/<principal>/<host>/<op>/<perm>
//	                           JSON acl.Binding (acl/authorizer.go); strings %-escaped
//	meta/scram-fake-key        32 random bytes: the key behind unknown users' made-up SCRAM salts
//	meta/scram/<mechanism>/<user> JSON: a SCRAM credential (salt, iterations, stored and server
//	                           keys; security/credentials.go); <user> is path-escaped
//	sg/...                     share-group state (sharegroup/store)
const (
	keyClusterID        = "meta/cluster-id"
	PrefixTopic         = "meta/topic/"
	PrefixDeletingTopic = "meta/deleting-topic/"
	// PrefixClusterDeletedTopic marks replicated topics' deletions seen.
	PrefixClusterDeletedTopic = "meta/cluster-deleted-topic/"
	PrefixBrokerConfig        = "meta/broker-config/"
	keyProducerIDSeq          = "meta/seq/producer-id"
	PrefixGroup               = "meta/group/"
	PrefixOffset              = "meta/offset/"
	PrefixShareGroup          = "meta/share-group/"
	PrefixGroupConfig         = "meta/group-config/"
	PrefixDLQPending          = "meta/dlq/pending/"
	PrefixDLQCount            = "meta/dlq/count/"
	PrefixTxn                 = "meta/txn/"
	PrefixClientQuota         = "meta/client-quota/"
	PrefixScram               = "meta/scram/"
	PrefixACL                 = "meta/acl/"
	KeyScramFake              = "meta/scram-fake-key"
	// PrefixShareGroups is the key prefix given to sharegroup/store.
	PrefixShareGroups = "sg/"
)

// Store is the badger database holding cluster metadata. It is safe for
// concurrent use (badger is).
type Store struct {
	db      *badger.DB
	pidSq   *badger.Sequence
	pidBase atomic.Int64 // SetProducerIDBase
	// gc group-commits the transaction coordinator's writes.
	gc *Committer
}

// DB is the database, for the packages that keep their records in it
// under the prefixes above.
func (m *Store) DB() *badger.DB { return m.db }

// Committer group-commits small writes (the transaction coordinator's).
func (m *Store) Committer() *Committer { return m.gc }

// badgerLogger routes badger's logging to zap; badger's Warningf does not
// match zap's SugaredLogger method name, hence this adapter.
type badgerLogger struct{ s *zap.SugaredLogger }

func (l badgerLogger) Errorf(f string, a ...any)   { l.s.Errorf(strings.TrimSpace(f), a...) }
func (l badgerLogger) Warningf(f string, a ...any) { l.s.Warnf(strings.TrimSpace(f), a...) }
func (l badgerLogger) Infof(f string, a ...any)    { l.s.Debugf(strings.TrimSpace(f), a...) }
func (l badgerLogger) Debugf(f string, a ...any)   {} // badger's debug output is per write: too chatty even for debug

// badgerOptions sets every option that matters for durability and
// footprint explicitly instead of trusting library defaults.
func badgerOptions(dir string, lg *zap.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithSyncWrites(true). // badger's default is false: a commit must survive power loss
		WithLogger(badgerLogger{lg.Named("badger").Sugar()}).
		WithLoggingLevel(badger.WARNING).
		WithNumVersionsToKeep(1).
		WithDetectConflicts(true).
		WithVerifyValueChecksum(true).
		WithCompactL0OnClose(true).
		WithMemTableSize(16 << 20).
		WithNumMemtables(2).
		WithValueLogFileSize(64 << 20).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(8 << 20).
		WithNumCompactors(2)
}

// removeEmptyBadgerFiles works around a badger crash window: badger
// creates a memtable (.mem) or value log (.vlog) file and only then sizes
// it, so a process killed in between leaves a zero-length file that makes
// the next badger.Open fail ("Create a new file"). A zero-length file
// holds no data, so removing it loses nothing. Found by the SIGKILL crash
// test (integration/crash_test.go).
func removeEmptyBadgerFiles(dir string, lg *zap.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, ".mem") || strings.HasSuffix(name, ".vlog")) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if info.Size() == 0 {
			lg.Warn("removing empty metadata file left by a crash", zap.String("file", name))
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Open opens (or creates) the metadata store in dataDir/meta.
func Open(dataDir string, lg *zap.Logger) (*Store, error) {
	dir := filepath.Join(dataDir, "meta")
	if err := removeEmptyBadgerFiles(dir, lg); err != nil {
		return nil, fmt.Errorf("broker: metadata store: %w", err)
	}
	db, err := badger.Open(badgerOptions(dir, lg))
	if err != nil {
		return nil, fmt.Errorf("broker: open metadata store: %w", err)
	}
	sq, err := db.GetSequence([]byte(keyProducerIDSeq), 1000)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("broker: producer id sequence: %w", err)
	}
	return &Store{db: db, pidSq: sq, gc: &Committer{db: db}}, nil
}

// Close releases the producer-id lease and closes the database.
func (m *Store) Close() error {
	err := m.pidSq.Release()
	return errors.Join(err, m.db.Close())
}

// ClusterID returns the cluster id, making and storing one on first use.
func (m *Store) ClusterID() (string, error) {
	var id string
	err := m.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(keyClusterID))
		if err == nil {
			v, err := item.ValueCopy(nil)
			id = string(v)
			return err
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		var raw [16]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return err
		}
		id = base64.RawURLEncoding.EncodeToString(raw[:])
		return txn.Set([]byte(keyClusterID), []byte(id))
	})
	return id, err
}

// NextProducerID hands out producer ids that are never reused, even
// across restarts (the sequence leases ranges durably).
func (m *Store) NextProducerID() (int64, error) {
	v, err := m.pidSq.Next()
	if err != nil {
		return 0, err
	}
	// Kafka producer ids start at 0; we start at 1000 to keep low ids
	// free for tests that hand-craft batches.
	return m.pidBase.Load() + int64(v) + 1000, nil
}

// SetProducerIDBase offsets every producer id handed out from now on by
// base: in a cluster each broker hands out ids from its own range
// (node id << 40), so no two brokers give a producer the same id.
func (m *Store) SetProducerIDBase(base int64) { m.pidBase.Store(base) }

// GetOrCreate returns key's value, storing make()'s first (durably,
// badger's own transaction) when it has none.
func GetOrCreate(db *badger.DB, key []byte, make func() []byte) ([]byte, error) {
	var v []byte
	err := db.Update(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if err == nil {
			v, err = it.ValueCopy(nil)
			return err
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		v = make()
		return txn.Set(key, v)
	})
	return v, err
}

// PutJSONOrDelete stores v as JSON under key, or deletes key when v is
// empty (override maps: group configs, client quotas).
func PutJSONOrDelete[M ~map[K]V, K comparable, V any](db *badger.DB, key []byte, v M) error {
	return db.Update(func(txn *badger.Txn) error {
		if len(v) == 0 {
			return txn.Delete(key)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return txn.Set(key, b)
	})
}

// ScanJSON decodes, in key order, every value stored under prefix as JSON
// into a V and calls fn with its key (without the prefix) and it.
func ScanJSON[V any](db *badger.DB, prefix string, fn func(name string, v V) error) error {
	return db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := string(it.Item().Key())
			var v V
			if err := it.Item().Value(func(b []byte) error { return json.Unmarshal(b, &v) }); err != nil {
				return fmt.Errorf("broker: decode %s: %w", key, err)
			}
			if err := fn(strings.TrimPrefix(key, prefix), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// BrokerConfigs returns the dynamic broker config overrides.
func (m *Store) BrokerConfigs() (map[string]string, error) {
	out := map[string]string{}
	err := m.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(PrefixBrokerConfig), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[strings.TrimPrefix(string(it.Item().Key()), PrefixBrokerConfig)] = string(v)
		}
		return nil
	})
	return out, err
}

// SetBrokerConfigs applies set (value) and delete (nil) overrides in one
// transaction.
func (m *Store) SetBrokerConfigs(changes map[string]*string) error {
	return m.db.Update(func(txn *badger.Txn) error {
		for k, v := range changes {
			var err error
			if v == nil {
				err = txn.Delete([]byte(PrefixBrokerConfig + k))
			} else {
				err = txn.Set([]byte(PrefixBrokerConfig+k), []byte(*v))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}
