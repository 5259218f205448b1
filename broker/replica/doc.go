// Package replica is one replica of a partition's raft group (issue 29,
// docs/CLUSTER.md): etcd raft's RawNode over the partition's own log
// (log/raftlog.Storage), driven by its owner one call at a time.
//
// A Replica has no goroutine and no clock of its own: its owner calls
// Tick, Step (messages from peers), Produce (on the leader) and Process
// from one goroutine, which makes it deterministic under the simulator
// (broker/clustertest) and leaves threads to the broker. Raft runs with
// asynchronous storage writes: Produce, ProposeInternal and Process
// write what raft hands over to the log without syncing; Process then
// fsyncs once for all of it and only then delivers the responses that
// promise durability (append acknowledgements, votes), applies, and
// answers produces, so everything an owner drains between two Process
// calls shares one fsync. Messages to peers are taken with Outbox after
// Process; with Config.Send those that promise nothing durable (a
// leader's appends and heartbeats, vote requests) leave at once, from
// whichever call produced them.
//
// It owns no lock: every method must be called from the owner's
// goroutine. It reads and writes only its partition directory.
//
// Only this package and log/raftlog import go.etcd.io/raft/v3
// (scripts/check-layering.sh).
package replica
