// Package cluster is one broker's part of a Shoal cluster (issue 29,
// docs/CLUSTER.md): the metadata group, whose replicated log holds the
// brokers and the topics with their replica placement, and a raft group
// per hosted partition, each driven by its own goroutine, all talking
// through one raftnet.Transport.
//
// # Groups
//
// Every group is a replica.Replica over a partition log in the data
// directory: the metadata group's is "__cluster_metadata-0", a data
// partition's "<topic>-<partition>" as on a single node, holding a
// partition.metadata naming its topic's id. On the peer network a data
// partition's group is "<topic>-<partition>@<topic id>" (wireName). A group's
// goroutine (group.run) is the only caller of its Replica: it ticks it,
// steps the messages raftnet hands in, runs the produces and proposals
// queued on its work channel, processes raft's Ready and sends the
// outbox. Callers on other goroutines read its published status
// (leader, term) atomically and queue work; nothing waits on a group's
// goroutine while holding a lock of this package.
//
// # Metadata
//
// Metadata records are internal entries (raftlog.Internal) holding
// JSON: broker registrations, topic creations, config changes and
// deletions (deletion.go), partition states and fences. Any broker proposes
// them (raft forwards to the leader); each broker applies them, in log
// order, to its Image, and starts the groups of the partitions placed
// on it. A record carries the id of the request that proposed it, so a
// proposer learns its outcome by applying it, and a retried proposal
// applied twice has the first one's outcome. The image lives in memory:
// a restarted broker rebuilds it by applying the metadata log again
// (retention is off for it).
//
// # Locks
//
// Node.mu guards the image, the group table and the waiting requests;
// it is held only for reads and updates of those, never across a
// channel send to a group or any I/O.
package cluster
