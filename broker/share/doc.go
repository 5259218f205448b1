// Package share is the share-group coordinator (KIP-932): queue-style
// consumption of a topic's partitions by the members of a share group,
// with records leased to one member at a time and accepted, released
// or rejected. The rules live in package sharegroup (a pure state
// machine per share-partition, and the "simple" assignor); this package
// wires them to the logs, the clock and the disk. share.go owns the
// share-partitions; groups.go the membership (ShareGroupHeartbeat,
// ShareGroupDescribe, ListGroups and DeleteGroups); sessions.go the
// share sessions of ShareFetch and ShareAcknowledge, released when their
// connection closes; fetch.go serves those two requests; offsets.go the
// share-group offsets admin (90-92); configs.go the group and
// broker-level configs; dlq.go and dlq_write.go the dead-letter topics
// (KIP-1191); mgroups.go the message-group modes; quota.go the delivery
// rate limits. The root's handlers (api_76..79, api_90..92) decode,
// make one call here, and encode.
//
// # Share-partitions
//
// Each (group, topic id, partition) has exactly one owner, a sharePart:
// a mutex around a *sharegroup.Partition. Every operation locks it,
// calls the state machine with the current time, persists the returned
// Effects.Records through sharegroup/store (badger, SyncWrites on), and
// only then unlocks and answers ("persist, then answer"): an
// acknowledgement is durable before its success is sent, so a restart
// never redelivers an accepted record. Acquisitions and renewals write
// nothing; after a crash the records they held come back Available.
//
// A share-partition is loaded lazily, on first use, from the store; one
// without persisted state is created at the offset share.auto.offset.reset
// names (latest = high watermark, earliest = log start, by_duration = the
// first offset at or after now - duration), and its initial snapshot is
// persisted before it is used. If a write fails the in-memory Partition is
// discarded (the core never rolls back) and reloaded from what is durable
// at the next use; the failed operation answers KAFKA_STORAGE_ERROR.
//
// Acknowledgements of one request that touch several share-partitions
// are group-committed: their owners are locked in key order (so two
// requests can never deadlock), the state machines run, one store.Write
// (one badger transaction, one fsync) persists all records, then all
// unlock. Concurrent requests are batched further by badger's own write
// pipeline.
//
// Acquiring reads the log under the share-partition's lock, from
// NextFetchOffset up to the high watermark, a chunk at a time, and hands
// the batch headers to Acquire; Records in the response are the whole
// log batches covering the acquired ranges, so the client never sees an
// acquired offset without its record (it would GAP-acknowledge it). In
// a message-group mode a batch is trimmed to the records acquired from
// it (batchcache.go: parsedBatch.trim).
//
// Each share-partition has a timer armed for the state machine's
// NextDeadline; it calls ExpireLocks through the same owner, persists
// the expiries and wakes long polls. Long polls (ShareFetch with nothing
// to acquire) wait on the log partitions' append waiters and on the
// share-partitions' own waiters, which acknowledgements, releases and
// expiries signal.
//
// # Ownership and lock order
//
// The package owns the share groups and their records, the
// share-partitions (through sharegroup/store), the share sessions, the
// GROUP-resource configs of consumer and share groups (configs.go), the
// dead-letter writes and their intents and counts (dlq.go,
// dlq_write.go), and the parsed-batch cache (batchcache.go). It reaches
// below only through Options; the root calls it, never the reverse.
//
//	shareGroup.mu → shareSession.mu → sharePart.mu (several only in key
//	order) → topics.Partition.mu (log waiters) / shareWaiters.mu
//	Coordinator.mu, shareSessionCache.mu, shareConfigStore.mu and the
//	broker's dynamic configs (Options.BrokerConfig) are leaves: held
//	only for map access, never during I/O.
//
// Nothing here is called with a lock of another package held, except
// by a topic deletion (under topics.Admin's lock: DeleteTopicState) and
// the consumer groups' config lookups (GroupConfigInt, GroupBrokerInt:
// under a groups.Group.mu, from the KIP-848 deadline and tick paths),
// which take only shareConfigStore.mu and the broker's dynamic configs.
// The groups' share-group check (IsShareGroup, taking Coordinator.mu)
// runs before they lock a group. The state collector's read-out
// (PartStates) takes each sharePart.mu in turn.
//
// sharePart.mu is held during that share-partition's own disk I/O (its
// store writes and its log reads), which blocks only users of that
// share-partition; no lock shared across share-partitions is ever held
// during I/O. shareGroup.mu is held while its record is persisted.
//
// # Seams
//
// Options.BeforeCommit and Options.DLQ are test hooks; readouts.go holds
// the read-outs and seams the root's tests use (named for what they read
// or simulate).
package share
