// Package store persists share-partition state (sharegroup.Record) in
// badger: per share-partition one snapshot key plus delta keys, in the shape
// of Kafka's ShareSnapshot/ShareUpdate records on __share_group_state.
//
// # Contract
//
// The broker owns the *badger.DB (opened with SyncWrites(true): share-group
// state must survive a hard crash; an acknowledgement is answered only
// after its Record is durable) and hands it to Open with a key prefix and
// a change-log directory (below).
// Write persists the Effects.Records of any number of share-partitions in
// one badger transaction (with a change log: one frame); Writes that
// arrive while another commits are group-committed into the next
// transaction or frame (one sync for all), and
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
//	prefix | uvarint(len(group)) | group | topicID (16 B) | partition (4 B BE) | 'x'                   → set aside (below)
//	prefix | 0xff                                                                                      → change-log watermark (below)
//
// Values are sharegroup.Record encodings (version byte, varints, CRC-32C;
// see sharegroup.Record.AppendBinary). Deltas sort by seq, which only grows
// for a key (a compaction deletes the deltas it folded in; the next delta
// continues the sequence). When SnapshotEvery deltas have accumulated the
// Store folds snapshot + deltas into a new snapshot in the same
// transaction (Kafka: share.coordinator.snapshot.update.records.per.snapshot,
// 500). A snapshot Record in a batch (a new or reset share-partition)
// replaces the snapshot and deletes the existing deltas.
//
// # Change log
//
// Opened with Options.LogDir (Open; the broker does), a group commit is
// not a badger transaction but one frame appended to a change log and
// made durable with one fdatasync; checkpoints move the frames into
// badger, in the layout above, in the background. A badger commit with
// SyncWrites costs a transaction, the oracle's wait for the previous
// commit, a hand-off to badger's writer goroutine and an msync of its
// memtable file; a frame costs a pwrite and an fdatasync of a file
// written once already, so its size and blocks never change. Measured
// here (BenchmarkWrite): 140 µs per write with one writer, 41-49 µs with
// eight, against 82-85 and 26-28 µs through the log.
//
//	LogDir/<seq, 16 hex digits>.log   segment files, prewritten with zeros to LogSegmentBytes
//	frame: uint32 LE payload length | uint32 LE CRC-32C of the payload | payload
//	payload: version byte (1) | entry ...
//	entry: uvarint len(group) | group | topicID (16 B) | partition (4 B BE) | uvarint n | n × (uint32 LE len | Record)
//
// Frames fill a segment one after the other; one that does not fit
// starts the next segment, made ready in the background. Replay reads a
// segment up to the first frame that is not whole with a matching CRC:
// the prewritten zeros after the last frame, or a write a crash cut
// short (one that was never acknowledged: a frame is written only after
// the previous one synced). A frame whose write or sync fails is zeroed
// and synced before the failure is reported, so it is never replayed; if
// that fails too, every later write fails until a restart, and so do
// Load, Keys and the deletions (a deletion the replay of that frame could
// undo). A segment made ready in the background that a write had to
// overtake (no spare was ready: it made its own, not prewritten) is
// dropped unused: segments are used in the order of their numbers, which
// replay follows.
//
// Checkpoint watermark. The key prefix | 0xff holds the log position
// (segment, offset) before which every frame is in badger, and how many
// share-partitions of the frame at that position are too (a frame too
// big for one badger transaction is applied one share-partition per
// transaction). It is written in the same badger transaction as the
// records it covers, so replay after a crash at any point applies no
// frame twice and skips none. A checkpoint runs when CheckpointBytes of
// frames have gathered or a segment filled, and removes the segments
// wholly before the watermark. Load, LoadRecords, Keys, Delete and
// DeleteGroup first checkpoint every durable frame and hold the
// checkpoint lock while they read or change badger: they see every
// durable write, and a deletion is never undone by replaying older
// frames. Open replays what a crash left after the watermark, then
// removes the old segments; Close checkpoints everything and removes the
// segments, leaving nothing to replay. While checkpoints fail (reported
// through Options.BackgroundError and retried with a backoff), frames
// wait in memory and in the log; past MaxUncheckpointedBytes (default 64
// MiB) writes fail too, until a checkpoint succeeds again (Load and Keys
// try one first).
//
// Records that do not fold onto what badger holds (a bug, or corrupt
// state: sharegroup.ErrCorruptRecord) fail their own write without a
// change log. With one they are durable before any fold, so the
// checkpoint sets that share-partition aside instead (the 'x' key, with
// the reason): loading it fails with ErrCorruptRecord, checkpoints skip
// its records, and Delete clears it; the others go on, and so do later
// starts.
package store
