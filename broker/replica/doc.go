// Package replica is one replica of a partition's raft group (issue 29,
// docs/CLUSTER.md): etcd raft's RawNode over the partition's own log
// (log/raftlog.Storage), driven by its owner one call at a time.
//
// A Replica has no goroutine and no clock of its own: its owner calls
// Tick, Step (messages from peers), Produce (on the leader) and Process
// (raft's Ready: append and fsync, persist the HardState, apply, hand
// out messages) from one goroutine, which makes it deterministic under
// the simulator (broker/clustertest) and leaves threads and batching of
// fsyncs to the broker. Messages to peers are taken with Outbox after
// Process; with Config.Send a leader's appends and heartbeats leave
// earlier, before its own fsync.
//
// It owns no lock: every method must be called from the owner's
// goroutine. It reads and writes only its partition directory.
//
// Only this package and log/raftlog import go.etcd.io/raft/v3
// (scripts/check-layering.sh).
package replica
