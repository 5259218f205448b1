// Package meta is Shoal's metadata store: one badger database (opened
// with its durability options set explicitly: SyncWrites on, checksums
// verified), the one table of its key space (store.go: every prefix any
// package writes under), the cluster id, the producer-id sequence
// (leased durably, never reused), a group committer that makes
// concurrent small writes share one sync (Committer), and the JSON
// scan/put helpers the owners of the records use.
//
// Meta owns the database handle, not the records: each record belongs
// to the package that writes it (topics, groups, share groups,
// transactions, quotas, configs), which reads and writes it through DB or
// Committer. Store is safe for concurrent use; Committer.mu is a leaf,
// held only around its queue and hook, never during a commit, so any package
// may write under any of its own locks. It imports nothing of Shoal's.
package meta
