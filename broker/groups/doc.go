// Package groups is the group coordinator: consumer groups of the classic protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup; classic.go), of
// the KIP-848 protocol (ConsumerGroupHeartbeat; consumer.go), and
// the committed offsets of every group (OffsetCommit, OffsetFetch,
// OffsetDelete; offsets.go), all durable in the metadata store
// (store.go). Shoal is a single node, so it coordinates every
// group. A group id names one group of one type at a time; an empty
// group converts to the other type when a member of that protocol joins.
//
// # Ownership
//
// Coordinator.mu guards only the map of groups; it is never held
// while a group's lock is taken, nor during I/O. Each group has its own
// lock, Group.mu, guarding all of its state (members, generation,
// offsets, timer). A group's owner may do I/O on its own behalf under
// Group.mu (persisting its metadata or offsets to badger before a
// response goes out: "persist, then answer"), which blocks only that
// group. Lock order: Group.mu → Coordinator.mu → the broker's dynamic configs
// (read through Options.BrokerConfig and GroupConfigInt) and
// topics.Registry.mu.
//
// A group is removed from the map only with its lock held, after its
// state became Dead; a caller that locks a group and finds it Dead looks
// the name up again (lockGroup).
//
// # Time
//
// Each group has at most one timer, armed for its earliest deadline
// (a member's session, the end of the join phase, the sync deadline, a
// pending member id's expiry). The timer callback takes Group.mu and runs
// tickLocked with the current time, which handles everything that is due
// and re-arms. Heartbeats only move deadlines later, so they never reset
// the timer: an early firing finds nothing due and re-arms. Every state
// change takes now from the caller (one time.Now per request).
//
// # Parked requests
//
// JoinGroup and SyncGroup may have to wait for other members. The handler
// then returns its response with a wait function (conn.go's two-phase
// handling): the group later sends the finished response on a channel
// with room for exactly one value, so the group never blocks on a slow or
// dead connection, and the connection's writer keeps responses in
// request order. Every parked request is answered exactly once: on
// completion, on an error, when its member is removed, or with
// NOT_COORDINATOR when the broker shuts down.
//
// Rejected designs: one goroutine per group fed by a queue (kfake runs
// every group on one loop): a per-group mutex gives the same
// serialisation with less machinery, and all waiting happens on the
// connection's writer, not in the group.
//
// # Transactions
//
// The transactions' pending offset commits are indexed here
// (PendingIndex, pending.go) under a leaf lock: the transaction
// coordinator keeps the index current under its txn's lock, the groups
// read it under Group.mu (deletions write deletion marks while anything
// is pending, expiry leaves pending partitions alone, OffsetFetch with
// RequireStable answers UNSTABLE_OFFSET_COMMIT). A TxnOffsetCommit
// holds its group's lock from LockTxnCommit to ReleaseTxnCommit while it
// adds, persists and stamps its offsets; a committed transaction applies
// them with ApplyTxnOffsets, taking each group's lock in turn.
//
// # Locks, in order
//
//   - Group.mu: one group and its offsets; held across that group's
//     badger writes; never two groups at once.
//   - Coordinator.mu: the map of groups only.
//   - PendingIndex.mu and the store's marks lock: leaves.
//
// Callers may hold a txn's lock (package broker's transactions) or the
// topic Admin's lock (DropTopicOffsets) when calling in. Under Group.mu
// this package calls out only to the lookups of Options: the broker's
// dynamic configs, the share coordinator's group configs
// (GroupConfigInt, GroupBrokerInt: shareConfigStore.mu and the dynamic
// configs) and topics.Registry, none of which takes a group lock.
// IsShareGroup (share.Coordinator.mu) is asked before a group is locked.
package groups
