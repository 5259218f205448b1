// Package store persists share-partition state (sharegroup.Record) in
// badger: per share-partition one snapshot key plus delta keys, in the shape
// of Kafka's ShareSnapshot/ShareUpdate records on __share_group_state.
//
// # Contract
//
// The broker owns the *badger.DB (opened with SyncWrites(true): share-group
// state must survive a hard crash; an acknowledgement is answered only
// after its Record is durable) and hands it to New with a key prefix.
// Write persists the Effects.Records of any number of share-partitions in
// one badger transaction; Writes that arrive while another commits are
// group-committed into the next transaction (one WAL sync for all), and
// each share-partition's records are applied atomically and in order.
// Submit is Write without the wait: the owner submits under its lock, in
// the order its states changed, and may wait (Pending.Wait) after letting
// go of it, so other owners' writes, and its own next ones, join the same
// commit. If a write fails, the in-memory Partitions whose records were
// in it must be discarded and re-Loaded (the pure core does not roll
// back); every later write of the same share-partitions fails too
// (ErrEarlierWriteFailed) without writing anything, until the owner
// reloads (Load) or deletes them. Load and Delete wait for the key's
// writes in flight.
// Load replays the snapshot and then the deltas through sharegroup.Recover,
// i.e. through Partition.Apply, the same code the live partition uses.
//
// A Store is safe for concurrent use by many share-partition owners, but
// each share-partition must have exactly one owner submitting its writes
// at a time; ErrConflict is never retried: it would be a bug.
//
// # Key layout
//
// All keys start with the broker's prefix (e.g. "sg/"), followed by the
// share-partition identity, length-prefixed so one group's keys never
// prefix another's:
//
//	prefix | uvarint(len(group)) | group | topicID (16 B) | partition (4 B BE) | 's'                   → snapshot
//	prefix | uvarint(len(group)) | group | topicID (16 B) | partition (4 B BE) | 'd' | seq (8 B BE)   → delta
//
// Values are sharegroup.Record encodings (version byte, varints, CRC-32C;
// see sharegroup.Record.AppendBinary). Deltas sort by seq, which only grows
// for a key (a compaction deletes the deltas it folded in; the next delta
// continues the sequence). When SnapshotEvery deltas have accumulated the
// Store folds snapshot + deltas into a new snapshot in the same
// transaction (Kafka: share.coordinator.snapshot.update.records.per.snapshot,
// 500). A snapshot Record in a batch (a new or reset share-partition)
// replaces the snapshot and deletes the existing deltas.
package store
