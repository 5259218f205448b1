// Package clustertest is the deterministic simulator of a partition's
// replicas (docs/CLUSTER.md, the design's §4.2): three or five replicas
// in one process on in-memory file systems (log.MemFS, whose crash
// clones model power loss), a network that drops, delays, duplicates and
// reorders messages and can be partitioned, a logical clock, and an
// idempotent producer; everything drawn from one seed, so a failure
// replays from its seed. It checks the invariants the cluster promises:
// one leader per term, no two replicas with different batches at a
// committed ordinal, every acknowledged batch committed once at its
// acknowledged offset, in the producer's order.
//
// Tests only; it imports the replica and the log, nothing of the broker.
package clustertest
