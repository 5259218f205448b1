// Package topics owns Shoal's topics: the registry every request looks
// them up in, each partition's log (package log) with its long-poll
// waiters, the durable topic records, topic administration (create,
// delete, grow, reconfigure), retention, and the syncer that makes
// appends durable and moves high watermarks.
//
// # Model
//
// A Topic has a name and an id that never change, partitions that only
// grow, and explicit config overrides; its records are in the metadata
// store (package meta, keys meta.PrefixTopic), written with SyncWrites
// before a change is applied in memory or answered. A Partition is one
// log plus the channels waiting for its high watermark to move; Topic,
// Index and Log never change once it is open.
//
// A deletion is durable first (the topic record goes and a pending
// clean-up record, meta.PrefixDeletingTopic, comes in one transaction),
// then the logs are deleted, then what the packages above keep of the
// topic is removed through the functions Options gives (group offsets by
// name, share-group state by id), then the pending record is cleared. A
// start-up finishes a clean-up a crash interrupted (FinishDeletions), and
// creating the name again finishes one that failed, so a new topic never
// inherits the old one's offsets.
//
// The Syncer (syncer.go) groups fsyncs across requests and partitions
// under the "always" policy, and flushes on a period under "interval".
//
// # Locks
//
//   - Admin.mu serialises topic creation, deletion, partition growth and
//     config changes (and, through Exclusive, dynamic broker config
//     changes); it is held across their disk I/O and a deletion's
//     clean-up, which takes the group and share-partition locks of the
//     packages above. Nothing takes Admin.mu while holding one of those.
//   - Registry.mu guards the topic maps and each topic's partition slice
//     and configs; never held during I/O. Taken after Admin.mu, before
//     Partition.mu.
//   - Partition.mu guards only the waiter set (a leaf).
//   - Syncer.mu guards the dirty set and waiters, never held during an
//     fsync; a leaf.
//   - A log.Partition has its own locks (package log); none of these is
//     held while calling into a log, except Admin.mu.
//
// Every method may be called holding no lock of this package; the
// lookups (Registry) also under any lock of the packages above, which is
// how every request uses them.
package topics
