// Package broker is everything in Shoal that has goroutines, sockets or
// clocks: the listener, connections, one handler file per Kafka API
// (api_NN_name.go), the metadata store on badger, and the wiring of the
// partition logs (package topics, over package log).
//
// # Packages
//
// broker/ is being split into packages with checked boundaries, leaves
// first (issue 27; the plan is ../shared/docs/broker-layout.md, the rules
// scripts/check-layering.sh). Landed, each with a doc.go stating its
// model, what it owns and its locks:
//
//   - kafkaerr: Go errors to Kafka codes; refusals with Kafka's messages.
//   - meta: the badger store, its one key-space table, the cluster id,
//     producer ids, the group committer. The records stay with their
//     writers (topics/store.go, groups/store.go).
//   - records: looking inside record batches; the fetch buffer pool.
//   - metrics: event metrics only; the state collector is metrics_state.go.
//   - configs: config definitions, validators, described entries.
//   - quota: client-quota entities and admin, token buckets, connection
//     counts; their use per request stays here (quota_*.go).
//   - topics: the registry, partitions and their waiters, topic records
//     and administration (topics.Admin), retention, the syncer. A
//     deletion reaches the groups and share groups through functions
//     given in topics.Options; the topic config table stays here
//     (configs.go), as it gathers the dedup and quota configs too.
//   - dedup: the dedup window's tables by topic id, the filtering append
//     of the produce path and the wait for a duplicate's first copy.
//   - groups: the group coordinator (classic and KIP-848 consumer
//     groups, committed offsets, their records) and the index of the
//     transactions' pending offsets. Share groups, the group configs
//     and the share-group check reach it through groups.Options.
//   - txn: the transaction coordinator (its state machine, records,
//     markers, timeout loop and recovery, the admission of a
//     transactional produce). Its broker configs stay here
//     (txn_configs.go), read through txn.Options.Setting.
//   - share: the share-group coordinator (KIP-932): share-partitions over
//     sharegroup and sharegroup/store, membership, share sessions,
//     ShareFetch and ShareAcknowledge, the offsets admin, dead-letter
//     topics (KIP-1191), message groups, delivery limits, and the
//     GROUP-resource configs of consumer and share groups, which the
//     groups read through groups.Options.
//   - security: the listeners (listeners, advertised.listeners,
//     listener.security.protocol.map), each TLS listener's reloading
//     certificates, and a connection's principal (a client
//     certificate's subject through ssl.principal.mapping.rules).
//     The root binds the listeners and runs the handshakes
//     (listeners.go). It also holds the SCRAM credentials and the SASL
//     exchanges (SCRAM, PLAIN, OAUTHBEARER); the root keeps each
//     connection's SASL state (sasl.go).
//   - acl: Kafka's authorization model (bindings, filters, Authorize),
//     durable in the metadata store; the handlers ask it through
//     authz.go.
//   - replica: one replica of a partition's raft group (issue 29,
//     docs/CLUSTER.md): etcd raft's RawNode over log/raftlog's Storage,
//     driven by its owner from one goroutine. Not wired into the broker
//     yet.
//   - cluster: one broker's part of a cluster: the metadata group
//     (brokers, topics and their placement), a raft group per hosted
//     partition, each on its own goroutine, over one raftnet transport.
//     Not wired into the Kafka handlers yet.
//   - raftnet: the peer network: one outbound TCP connection per peer
//     carrying every group's raft messages as bytes, batched per flush.
//   - clustertest: the deterministic simulator of replicas (tests only).
//
// None of the packages above imports this one or a sibling it has no
// rule for. What stays here is the server: the listener, connections,
// the wiring (broker.go), one file per Kafka API, the fetch sessions,
// the config tables, the quotas per request, the state collector.
//
// # Requests
//
// Each connection has a reader goroutine that decodes and processes one
// request at a time, in order, and a writer goroutine that sends the
// responses in the same order (conn.go). A produce waiting for its fsync
// hands the writer a wait function, so the reader goes on with the next
// request meanwhile; the response order never changes. acks=0 produce
// gets no response. A frame over the size limit, one that does not
// decode, or an API or version we do not serve closes that connection and
// nothing else. The versions served are declared in each API file's init
// and collected into the one table ApiVersions answers from (apis.go).
//
// # Durability
//
// Persist, then answer. Under the default fsync policy the log's high
// watermark only moves past fsynced bytes, a produce with acks=1 or
// acks=all is answered only after its fsync, and fsyncs are grouped
// across requests and partitions by the syncer (topics/syncer.go). Topic
// metadata and configs are written to badger (SyncWrites on) before a
// create, delete or alter is answered.
//
// # Ownership and lock order
//
//   - Topics (package topics): topics.Admin's lock serialises topic
//     creation, deletion, partition growth and topic and broker config
//     changes (they do disk I/O; they are rare). A deletion removes the
//     topic's group offsets and share-group state under it, taking
//     group.mu and sharePart.mu in turn: nothing takes the Admin's lock
//     while holding a group, share-partition or transaction lock.
//     Registry.mu guards the topic maps; Partition.mu only the long-poll
//     waiter set; Syncer.mu the dirty set, never held during fsync.
//
//   - A log.Partition has its own locks (see package log); the broker never
//     holds a broker lock while calling into a log except the Admin's.
//
//   - fetchSession.mu is held by the one fetch using a session;
//     fetchSessionCache.mu only for map access.
//
//   - Groups (package groups): Coordinator.mu guards only the group map;
//     Group.mu guards one classic or KIP-848 group and its offsets and
//     may do that group's badger writes; never two groups at once.
//
//   - Share groups (package share): share.Coordinator.mu guards only
//     its maps; shareGroup.mu guards one share group's membership;
//     shareSession.mu one share session; sharePart.mu one share-partition
//     (several only in key order) and may do its badger writes.
//
//   - The state collector (metrics_state.go) runs on scrapes and takes
//     Registry.mu, then each Group.mu and each sharePart.mu in turn,
//     holding no other lock and doing no I/O under them.
//
//   - Transactions (package txn): txn.Coordinator.mu guards only the txn
//     map; the pending-offsets index is the groups' (groups.PendingIndex,
//     its mu a leaf); Txn.mu guards one transactional id and is
//     held across its badger writes, its marker appends and fsync waits,
//     the group locks its committed offsets go to, and a transactional
//     produce's appends (so no EndTxn slips between check and append);
//     never two txns at once. A TxnOffsetCommit holds its group's lock
//     while it adds, persists and stamps its pending offsets (offset
//     expiry and deletions read them under that lock), after waiting
//     for its txn's last completion, which takes group locks itself.
//
//   - Dedup (package dedup): Window.mu guards only the map of tables, by
//     topic id (a leaf); a table's mu guards one topic's ids and is held
//     during a produce's lookup and insertion and during a rebuild, which
//     reads that topic's logs (only its produces wait).
//
//   - Quotas (package quota): Manager.writeMu serialises AlterClientQuotas
//     and may do its badger write; Manager.cfgMu guards the entity
//     configs, Manager.mu the token buckets, ConnCounts.mu the open
//     connection counts. The last three are leaves: held briefly, never
//     during I/O, and no lock of Shoal's is taken under them (the
//     throttle metric is observed under Manager.mu). A connection's
//     connQuota belongs to its reader goroutine.
//
// Order: Admin → Registry.mu → Partition.mu; Admin → Group.mu,
// sharePart.mu (a topic deletion's clean-up).
// Txn.mu → Group.mu → txn.Coordinator.mu, PendingIndex.mu; Txn.mu → log
// locks. fetchSession.mu may be held while taking Registry.mu and
// Partition.mu, never the reverse.
// Group.mu → groups.Coordinator.mu; Group.mu → Broker.dyn /
// share's shareConfigStore.mu (group configs) / Registry.mu. The
// share-group check (share.Coordinator.mu) precedes Group.mu.
// shareGroup.mu → shareSession.mu → sharePart.mu → Partition.mu.
package broker
