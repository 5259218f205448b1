// Package txn is the transaction coordinator (Kafka's
// TransactionCoordinator, KIP-98 and KIP-890): InitProducerId,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
// DescribeTransactions and ListTransactions, the admission of a
// transactional Produce (AdmitProduceLocked), the markers that end a
// transaction in its partitions, the timeout loop, and recovery at
// start. Shoal is the only node, so it coordinates every transactional
// id. The root's handlers decode a request, make one call here, and
// encode the answer.
//
// # Model
//
// Shoal is the only node, so it coordinates every transactional id. Each
// transactional id has one txn, whose state machine follows Kafka's
// TransactionState:
//
//	Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
//	  ▲                                  │   └──EndTxn(abort), timeout──▶ PrepareAbort ──markers──▶ CompleteAbort
//	  └──────────── InitProducerId (epoch + 1) ◀──────────── Complete* ──AddPartitions──▶ Ongoing
//
// Persist, then answer: every change of a txn is written to badger
// (meta/txn/<id>, SyncWrites) before the request that made it is
// answered, and before anything that depends on it happens; the one
// exception is a partition added by a Produce v12 (KIP-890 part 2),
// which its own fsynced batches record (see admitProduceLocked and
// adoptOpenTxns). EndTxn writes PrepareCommit (or PrepareAbort) first:
// from then on the decision is durable. What follows depends on the
// epoch:
//
//   - EndTxn v5+ moves the producer to its next epoch with the decision
//     (Bumped), so its markers carry an epoch above every batch of the
//     transaction. As Kafka does, EndTxn then answers at once: the
//     markers are appended (so the producer's next batches land behind
//     them and their fsync covers them) and finish, in the background,
//     waits for their fsync, applies a commit's offsets and writes
//     CompleteCommit (CompleteAbort). A read_committed consumer sees the
//     outcome once the markers are fsynced, a few milliseconds after the
//     producer; OffsetFetch with RequireStable answers
//     UNSTABLE_OFFSET_COMMIT until the offsets are applied. If the
//     broker stops before that, the decision is completed again at
//     start, skipping every partition whose producer already reached the
//     decision's epoch: the marker is there, and a second one would end
//     the next transaction.
//   - Otherwise (EndTxn v0-v4, an exhausted epoch) EndTxn appends the
//     markers and waits for their fsync, applies the offsets, writes
//     Complete* without waiting for that write's fsync, and answers. A
//     new transaction started by a Produce v12 then waits for that write
//     (settleLocked): a replayed marker at the same epoch cannot tell
//     which batches it ends.
//
// Every later write of the txn waits until the previous completion is
// durable (persistLocked → settleLocked), redoing what failed of it.
// If writing the markers fails (a partition offline), the decision stays
// durable in Prepare*: EndTxn is answered as Kafka would (the decision is
// taken), the timeout loop retries the completion, and until it succeeds
// requests on that transactional id get CONCURRENT_TRANSACTIONS. At start
// every txn found in Prepare* is completed the same way before the
// listener opens; an Ongoing one keeps its start time and is aborted by
// the timeout loop once it is older than its timeout. Replaying markers is
// harmless (a marker for a producer with nothing open in a partition only
// adds a control batch), so a completion interrupted by a crash is simply
// done again: never half-applied.
//
// A transaction open longer than its timeout is aborted by the broker
// (transaction.abort.timed.out.transaction.cleanup.interval.ms): the
// epoch is bumped first, so the markers carry the new epoch and fence the
// old producer's late writes in every partition, and its next request
// gets PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for old versions). A
// transactional id idle in Empty or Complete* for
// transactional.id.expiration.ms is forgotten.
//
// # Ownership and locks
//
// The package owns every txn and its badger records (meta.PrefixTxn,
// Record, Key). It reaches below only through Options: the metadata
// store (its records, producer ids), the topic registry and syncer (the
// markers and their fsyncs), and the group coordinator (applying a
// commit's offsets, the pending-offsets index, a TxnOffsetCommit's group
// lock).
//
// Coordinator.mu guards only the map of txns. Txn.mu guards one txn and
// is held across its badger writes, its marker appends (log locks) and
// the group locks its offsets go to (a TxnOffsetCommit's, a commit's,
// dropping deletion marks). The index of the open transactions' pending
// offsets belongs to the groups (groups.PendingIndex, a leaf lock); a
// txn keeps it current under Txn.mu. Order: Txn.mu → Group.mu →
// Coordinator.mu, PendingIndex.mu; Txn.mu → log locks. Never two txns at
// once. A transactional Produce holds its Txn.mu (Lock) across its
// appends; nothing here is called with a group's or a partition's lock
// held. Background completions take no txn lock; Wait waits for them.
//
// # Seams
//
// The test hooks in Options run at the points their names say;
// BeforeStep fails a completion step ("markers", "complete") the way an
// offline partition or a failed write does. "markers" runs before each
// attempt to write a txn's markers: twice for a Bumped decision whose
// background start fails (startCompletionLocked, then completeLocked
// at once), and again at each retry by Recover and the timeout loop;
// "complete" runs before a Complete* write (finish and redoLocked).
// redoLocked, which redoes a failed background completion, rewrites
// markers not yet durable without calling "markers". Completion and
// Record are read-outs for tests: a completion's end and error, and a
// txn as it would be stored.
package txn
