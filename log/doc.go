// Package log stores the durable log of each topic partition: segment
// files of Kafka RecordBatch v2 bytes, sparse offset and time indexes,
// retention, producer (idempotence) state and crash recovery.
//
// It never imports the standard library's "log" (this package shadows
// it); it logs through the *zap.Logger given to Open. It knows nothing of
// the broker: it imports only the standard library, zap and protocol (for
// the RecordBatch header layout).
//
// # Model
//
// A Partition is a directory. Records are appended as the producer's
// RecordBatch bytes, verbatim except for baseOffset, which Append patches
// in place (the batch CRC does not cover it, so nothing is re-encoded).
// Offsets are contiguous: every batch starts where the previous one ended.
// Three offsets describe a partition:
//
//	LogStartOffset <= HighWatermark <= LogEndOffset
//
// LogEndOffset (LEO) is the next offset to assign. HighWatermark (HW) is
// what consumers may see; the broker advances it with SetHighWatermark
// after Sync (fsync-before-ack) or right after Append (interval mode). The
// log never advances it by itself, except that Open sets HW = LEO (on a
// single node everything recovered is all there is; a raft replica's log,
// Config.Replica, opens with HW = LogStartOffset instead, and the replica
// raises it from raft's commit). LogStartOffset moves
// up with DeleteRecordsBefore and retention.
//
// Append writes with one pwrite(2) per call, at the segment's size, and
// no fsync; Sync fsyncs and returns the durable end. A process kill
// (SIGKILL) loses nothing that Append returned (the page cache survives);
// a power loss loses what was not covered by a Sync.
//
// Zeros ahead (Config.ZeroAheadBytes): while a partition's Syncs are
// small (acknowledgements waiting on single small batches), Append also
// writes zeros after the active segment's data, up to that many bytes and
// never past segment.bytes; the next Sync makes them durable with the
// file's new length, and the Syncs after it write over allocated blocks,
// so they change no file metadata and skip the file system's journal
// commit (on ext4 here an fdatasync of a 4 KiB write is about half as long
// over zeros as growing the file). A roll cuts the zeros off before the
// segment is sealed (the next Sync fsyncs it before anything appended
// after the roll counts as durable), and so does Close, before the index
// files that describe the file's length. A crash leaves a zero tail that
// recovery reads as the data's end (steps 3 and 4). The zeros take disk
// space that Size (DescribeLogDirs, retention.bytes) does not count: up
// to ZeroAheadBytes per active segment. A Shoal from before zeros ahead
// may call such a tail damage: stop cleanly before downgrading.
//
// # Files
//
// A partition directory holds, for each segment, files named by the
// segment's base offset in 20 digits (as Kafka does), plus one checkpoint:
//
//	00000000000000000000.log        batches, verbatim
//	00000000000000000000.index      sparse offset index (sealed segments)
//	00000000000000000000.timeindex  sparse time index (sealed segments)
//	00000000000000001234.snapshot   producer state as of offset 1234
//	partition.checkpoint            log start offset + recovery point
//
// Files ending in .tmp are interrupted atomic writes and are deleted by
// Open, as are index files without a .log.
//
// # Segment file (.log)
//
// Concatenated RecordBatch v2, exactly as produced (protocol/batch.go has
// the header layout). Positions and relative offsets are 32-bit, so a
// segment holds at most 2 GiB (segment.bytes is clamped to MaxInt32) and
// at most 2^32 offsets:
//
//	+----------------+-------------+-----+----------------+------------------------+
//	| baseOffset i64 | length i32  | ... | crc (CRC-32C)  | attributes .. records  |
//	+----------------+-------------+-----+----------------+------------------------+
//	  patched by Append              ^ 61-byte header      covered by the crc
//
// # Index files (.index, .timeindex)
//
// Written when a segment is sealed (at roll, synced by the next Sync) and
// for the active segment at Close. Big-endian. The header describes the
// segment, so a clean Open reads only the headers:
//
//	offset size field
//	     0    4 magic "SHOI" (.index) or "SHTI" (.timeindex)
//	     4    1 version (2; version 1 files, without ordinals, are
//	               rebuilt from their segment, once, at Open)
//	     5    3 reserved, zero
//	     8    8 base offset of the segment
//	    16    8 next offset (after the segment's last batch)
//	    24    8 size of the .log file this index describes
//	    32    8 largest batch maxTimestamp in the segment (-1: none)
//	    40    8 base offset of the first batch with that timestamp (-1: none)
//	    48    8 maxTimestamp of the first batch (segment.ms roll base; -1: none)
//	    56    8 base ordinal: the ordinal of the segment's first batch
//	    64    8 batch count
//	    72    4 entry count
//	    76    4 CRC-32C of the entries
//	    80    4 CRC-32C of bytes 0..79
//	    84      entries
//
//	.index entry (12 bytes):     relative offset u32 | position u32 | relative ordinal u32
//	.timeindex entry (12 bytes): timestamp i64       | relative offset u32
//
// An offset index entry points at a batch's first byte and is added when
// more than index.interval.bytes were appended since the previous entry
// (position 0 is implicit). A time index entry (T, R) is added at the same
// points when the segment's running max timestamp grew: every batch up to
// and including the batch at relative offset R has timestamps <= T.
// Lookups binary-search the entries (in memory for the active segment,
// with ReadAt for sealed ones) and then scan batch headers forward; by
// ordinal (ReadOrdinals) the same way on the relative ordinal.
//
// # Ordinals
//
// Batches are numbered consecutively across the log, the first batch of a
// new log being 1: a raft replica (log/raftlog) uses them as its entry
// indexes, since raft needs dense indexes and Kafka offsets advance by
// record count. The first segment's base ordinal is in the checkpoint
// (version 2); every later segment's is its predecessor's plus its batch
// count, which the index header states again: an index whose base
// ordinal disagrees is stale and rebuilt. A checkpoint without ordinals
// (version 1, or damaged) numbers a single node's log from 1 again (its
// ordinals count batches, nothing more); for a Config.Replica log with
// segments it is ErrCorruption, as its entry indexes cannot be guessed
// (one empty segment, what a first Open that failed before its
// checkpoint leaves, is a new log). The first Open after an upgrade from
// version 1 files re-reads and CRC-checks every segment once to rebuild
// its index: the fast open of a trusted prefix starts with the next one.
//
// # Partition checkpoint (partition.checkpoint)
//
//	offset size field
//	     0    4 magic "SHCP"
//	     4    1 version (2; version 1 files, 28 bytes without the
//	               ordinal, are still read)
//	     5    3 reserved, zero
//	     8    8 log start offset
//	    16    8 recovery point: every offset below it was fsynced
//	    24    8 base ordinal of the first segment
//	    32    4 CRC-32C of bytes 0..31
//
// Written atomically (write .tmp, fsync, rename, fsync the directory) by
// the first Sync after a roll, by a Sync that moves the recovery point
// when the last write is older than Config.CheckpointIntervalMs (Kafka's
// log.flush.offset.checkpoint.interval.ms, 1 minute), by Close, by
// DeleteRecordsBefore (before it returns), by retention when it deleted
// segments, and by Open after recovery. So a crash re-reads about a
// minute of appends, not the whole active segment.
//
// # Producer snapshot (<offset>.snapshot)
//
//	offset size field
//	     0    4 magic "SHPS"
//	     4    1 version (2; version 1 files, without the aborted
//	               section, are still read)
//	     5    3 reserved, zero
//	     8    8 offset: the state reflects every batch below it
//	    16    4 entry count n
//	    20  n*151 entries, by producer id:
//	          producerId i64, epoch i16, lastTimestamp i64,
//	          coordinatorEpoch i32, currentTxnStartOffset i64 (-1: no
//	          open transaction), batch count u8 (<= 5), 5 x (firstSeq
//	          i32, lastSeq i32, baseOffset i64, lastOffset i64), oldest
//	          first
//	     .    4 aborted transaction count m (version 2)
//	     .  m*24 aborted transactions, by marker offset: producerId i64,
//	          firstOffset i64, lastOffset i64 (the ABORT marker); those
//	          whose marker is below the log start offset are left out
//	   end    4 CRC-32C of everything before
//
// Taken at each roll (written, atomically, by the next Sync) and at Close;
// the two newest are kept.
//
// # Damaged files we define
//
// A damaged or stale index file (bad magic, version, CRC, size, or a .log
// size other than the one recorded) is ignored and rebuilt by scanning the
// segment. A damaged checkpoint is ignored: the log start offset falls
// back to the first segment and the whole log is recovered as if nothing
// had been fsynced (a DeleteRecords advance may be lost; no record is). A
// damaged snapshot is deleted and the producer state rebuilt from an
// older snapshot or the start of the log. None of these is an error.
//
// Damage to record batches below the recovery point is ErrCorruption from
// Open, and nothing is truncated, so the evidence stays for an operator:
// those batches were fsynced, and dropping them silently would lose
// acknowledged records.
//
// # Recovery (Open)
//
//  1. Delete *.tmp and orphan index files; read the checkpoint. Segments
//     wholly below its log start offset (an interrupted deletion) are
//     deleted.
//  2. Trusted prefix: a segment whose two index files are intact, match its
//     .log size, continue the previous segment and end at or below the
//     recovery point is trusted without reading its .log: Open reads only
//     its index files (about 1/200 of the log, CRC-checked), so a cleanly
//     closed 10 GiB partition opens in well under a second.
//  3. A segment wholly below the recovery point whose index is unusable is
//     re-read (CRC-checked) and its index rewritten; damage is
//     ErrCorruption, except a tail of zeros after data the next segment
//     continues (zeros ahead whose cut at a roll was not durable yet:
//     nothing is missing), which is cut off.
//  4. From the first remaining segment on, every batch is re-read:
//     framing, CRC-32C, recordCount == lastOffsetDelta+1, baseOffset equal
//     to the expected next offset, 32-bit limits. Batches below the
//     recovery point (fsynced, CRC-checked on append) are read by their
//     headers alone, without the CRC, as the trusted prefix is. A tail of
//     zeros is the data's end (zeros ahead, or a write none of which
//     landed): it is cut off, and the next segment may continue the log;
//     below the recovery point only if the next segment continues it
//     (else fsynced data reads back as zeros: ErrCorruption, before
//     anything is cut).
//     At any other first failure the
//     segment is truncated at the last valid byte and all later segments
//     are deleted; a segment that does not continue the log is deleted
//     with all later ones. If this would cut below the recovery point,
//     Open returns ErrCorruption instead, before changing anything.
//  5. Recovered segments other than the last get index files; recovered
//     files are fsynced and the directory synced.
//  6. The log start offset is clamped to [first base, LEO].
//  7. Producer state: the newest valid snapshot at or below LEO is loaded
//     (newer ones are deleted: the log was truncated below them) and batch
//     headers from its offset to LEO are replayed, with the transaction
//     state (see Transactions): control batches are read whole for their
//     marker type.
//  8. The checkpoint is rewritten with recovery point = LEO (everything
//     was fsynced in step 5), and HW is set to LEO.
//
// # Append validation
//
// Each batch: a whole header and body (ErrCorruptMessage), magic 2
// (ErrUnsupportedMessageFormat), size <= max.message.bytes
// (ErrMessageTooLarge), CRC-32C (ErrCorruptMessage), recordCount > 0 and
// == lastOffsetDelta+1 (ErrInvalidRecord). A request larger than
// segment.bytes is ErrMessageTooLarge. Records inside a batch are not
// decoded (compressed payloads are never inflated).
//
// Idempotent producers (producerId >= 0), following Kafka's
// ProducerAppendInfo: the last 5 batches of each producer are remembered;
// an exact retry (same epoch, first and last sequence) of one of them
// returns its original offsets with Duplicate set and appends nothing; an
// older epoch is ErrInvalidProducerEpoch; a newer epoch must start at
// sequence 0 and otherwise the first sequence must follow the last one,
// wrapping from MaxInt32 to 0 (ErrOutOfOrderSequence). An unknown producer
// id is accepted at any sequence, as Kafka does once a producer's state is
// gone (expired after producer.id.expiration.ms, or lost with the log):
// refusing would wedge that producer forever. Control batches carry no
// sequence and may only move the epoch forward. A request whose batches
// are partly duplicates is ErrInvalidRecord.
//
// # Transactions
//
// Producers may not write control batches (ErrInvalidRecord); the broker
// writes transaction markers with WriteMarker. A transactional batch
// (attributes bit 4, producer id required) opens a transaction for its
// producer in this partition, starting at its base offset, unless one is
// open; while it is open a non-transactional batch from that producer is
// ErrInvalidTxnState. WriteMarker appends a one-record COMMIT or ABORT
// control batch (Kafka's layout: key = version 0, type; value = version
// 0, coordinator epoch), closes the open transaction, and for an abort
// adds (producer id, first offset, marker offset) to the aborted
// transactions index. A marker with an older epoch than the producer's is
// ErrInvalidProducerEpoch; a newer one moves the epoch forward, fencing
// the producer's older batches (the coordinator bumps the epoch when it
// aborts a timed-out transaction).
//
// LastStableOffset = min(HW, first offset of the oldest open transaction)
// is an atomic load; the open transactions are a small map under the
// append lock and their least first offset an atomic, so the
// non-transactional append path pays one branch per producer batch.
// AbortedTransactions(from, to) returns the index entries overlapping a
// fetched range (marker >= from, first offset < to); Fetch under
// read_committed returns them so clients drop the aborted records.
//
// Durability of the index: persisted in the producer snapshot (version
// 2) and rebuilt past it in recovery, rather than in per-segment
// .txnindex files as Kafka does. Recovery already replays every batch
// header from the newest snapshot to LEO; markers in that range are read
// whole (they are 78 bytes) to learn their type, so the index and the open
// transactions come back exactly as they were, after a clean close or a
// crash, at no extra cost on a clean open. A producer with an open
// transaction never expires (producer.id.expiration.ms), so its marker
// always finds its first offset. Known limit: the index lives in memory
// and in every snapshot (24 bytes per aborted transaction whose marker is
// above the log start offset), so a partition that aborts millions of
// transactions and keeps them (no retention) carries them all; Kafka's
// per-segment .txnindex files would bound that.
//
// # Compaction (clean.go)
//
// With cleanup.policy compact (Config.Cleanup), Clean keeps at least the
// last record of every key, as Kafka's log cleaner does; offsets never
// change. One pass: the plan (under the append lock) takes the sealed,
// fsynced segments up to End, the base of the first segment that is
// active, above the high watermark or the last stable offset (an open
// transaction's records are never cleaned), or holds a batch newer than
// min.compaction.lag.ms. The offset map (OffsetMap: a 128-bit hash of
// the key and the last offset, 24 bytes per key, Kafka's dedupe buffer)
// takes the keys of [FirstDirty, End); when it fills, End drops to the
// batch that did not fit and the rest waits for the next pass. Then
// every segment from the first one below End is rewritten to a
// "<base>.log.clean.tmp" file: a record below End goes if a later record
// of its key is below End, if it has no key (Kafka's cleaner drops them
// too), if its transaction was aborted, or if it is a tombstone whose
// batch's delete horizon has passed. The horizon is KIP-534's: the
// first clean that keeps a tombstone wholly below End rewrites its
// batch with the horizon (now + delete.retention.ms) as base timestamp
// and the delete-horizon attribute (0x40), the records' timestamp deltas
// re-encoded so that each keeps its timestamp; the partition remembers
// the latest horizon it left (in memory), and once it passes the log is
// due a clean even with nothing dirty. A kept CreateTime batch's max
// timestamp is recomputed from its kept records, as Kafka does. Kept batches
// keep every header field but length, record count and CRC (their
// lastOffsetDelta too, so they still span their offsets; compressed
// ones are recompressed with their codec through CleanOptions.Codec).
// A batch left without records becomes an empty header if it is a
// producer's newest batch (sequence checks and recovery's replay need
// its epoch and sequence; Kafka keeps it too); the rest, consecutive,
// collapse into one empty batch without a producer spanning their
// offsets, so the log stays contiguous, as recovery requires.
// Transaction markers stay, but for a commit marker whose transaction
// kept no batch in the pass (the rewrite tracks, in log order, whether
// each producer's current transaction kept one), that is older than
// delete.retention.ms, and that lies below the oldest producer snapshot
// kept (recovery replays from a snapshot, or from the first segment,
// where that transaction's batches are gone too, so no replay opens a
// transaction the marker would have closed): it goes, as in Kafka. Abort
// markers stay: the aborted-transaction index (in memory, and in the
// producer snapshots) still lists their transactions, and a
// read_committed consumer given an aborted transaction skips its
// producer's batches until it reads the abort marker. Ordinals of a single node's
// log may then skip (only a replica needs them dense; a replica's log
// is not compacted). A segment whose copy is no different is left as
// it is.
//
// Consecutive segments are cleaned into one, as Kafka's cleaner groups
// them: at most segment.bytes together before cleaning and fewer than
// 2^31 offsets, so a compacted log keeps few segments (and open files)
// however often it rolled.
//
// Swap: the copy and its two index files are fsynced under names of
// their own, then, under the sync lock, renamed over the first
// segment's (index files first) and the segment list takes the new
// segment; readers still reading an old one keep its files open. A
// merge must never leave the merged segment beside one it replaced (two
// segments holding one offset), so its copy is first renamed to
// "<base>.log.swap" and the directory synced; the other segments' files
// are then deleted and the directory synced again; only then is the
// .swap renamed over "<base>.log". Open completes a .swap it finds: it
// deletes the segments it covers and renames it. Segments are
// swapped in log order, and a crash leaves each either old or new: any
// such mix is a valid log with the same final table (a tombstone is
// only dropped once every older record of its key, in earlier
// segments, is gone). An index that disagrees with its .log after a
// crash between renames is rebuilt by Open, which also deletes *.tmp.
// A Clean that fails on the log's contents (a batch that does not
// decode, an offset map too small for one batch) marks the log
// uncleanable until it is reopened (CleanableInfo.Uncleanable), as Kafka
// does, so one bad partition does not hold the cleaner. A cleaner
// checkpoint beyond the log end (the log was cut in recovery) counts for
// nothing. CleanOptions.Cancel abandons a clean between two batches.
//
// The end of the pass is recorded in "cleaner.checkpoint" (magic SHCC,
// version, offset, CRC-32C; 20 bytes), so the next pass maps only what
// came after; its loss only makes a pass redo work.
//
// Locks: Clean holds cleanMu (one clean per log) throughout, the
// append lock to plan, the sync lock and then the append and segment
// locks only for the renames and the swap. Retention, DeleteRecords or
// Close removing a segment meanwhile abandons the pass. Under compact
// alone, retention.ms and retention.bytes delete nothing.
//
// Differences from Kafka: delete.retention.ms counts from the
// tombstone's batch's max timestamp, not from when the cleaner first
// saw it (Kafka's delete horizon, KIP-534); transaction markers are
// kept for ever, and batches left empty are merged rather than
// dropped (offsets between segments must be contiguous here).
//
// # Replicas
//
// A raft replica's log is written differently (log/replica.go). The
// leader validates a produce with Prepare, which assigns offsets (and a
// LogAppendTime) in place like Append but writes nothing; raft
// replicates the batches, and every replica, the leader too, writes
// them with AppendReplicated: verbatim (baseOffset must be the log end
// offset, the CRC must hold; leader epoch, timestamps and attributes are
// kept; control batches, markers and raft's own, are accepted), with
// producer and transaction state replayed as recovery replays it, never
// rejected: the leader checked the sequences, and a replica holds what
// the majority holds. The high watermark is raised by the replica from
// raft's commit.
//
// TruncateFrom(ordinal) drops a conflicting tail, never below the high
// watermark. It lowers the recovery point in the checkpoint to the cut
// first (durably), then deletes later segments, newest first, truncates
// and fsyncs the cut segment (which becomes the active one, its index
// rebuilt from its batch headers), deletes producer snapshots above the
// cut and syncs the directory, and rebuilds producer and transaction
// state from the newest remaining snapshot. A crash in between leaves a
// prefix of the old log at least as long as the cut (a segment beyond a
// gap lies above the lowered recovery point and is deleted by Open):
// the truncation then did not finish, and raft, which acknowledged
// nothing after it, repeats it.
//
// Every error wraps one of the exported sentinels (errors.Is). After a
// failed write or fsync the partition is failed for good: Append, Sync,
// Read, retention and DeleteRecords return the first error, wrapped
// (OffsetForTimestamp and MaxTimestamp find nothing), because the page
// cache may no longer match the disk; the broker must reopen the
// partition (running recovery) to serve it again.
//
// # Concurrency
//
// All methods of Partition are safe for concurrent use.
//
//   - Append calls are serialised by the append lock; Append does no fsync.
//   - Sync does not hold the append lock while fsyncing: it captures the
//     LEO and the files to sync under the lock, releases it, fsyncs, and
//     returns the captured LEO. Concurrent Syncs run one at a time; one
//     that finds nothing new returns without an fsync (group commit).
//   - Read, OffsetForTimestamp and MaxTimestamp never take the append
//     lock. They take the segment-list lock shared, which writers take
//     exclusively only to add a segment (roll) or drop segments
//     (retention, DeleteRecords), and each segment's small lock for a
//     consistent (size, next offset, index) snapshot. Sealed segments are
//     immutable.
//   - HighWatermark, LogEndOffset, LogStartOffset and Size are atomic loads.
//   - LastStableOffset is two atomic loads; AbortedTransactions takes only
//     the small transaction lock (a leaf, taken under the append lock by
//     WriteMarker and snapshots).
//   - TruncateFrom (replicas, rare) holds the sync and append locks and
//     the segment-list lock exclusively for its whole run, so readers
//     wait for it; it takes the transaction lock last, with segment locks
//     shared under it (only the appender takes those exclusively).
//   - Lock order: sync lock -> append lock -> segment-list lock -> segment
//     lock. The sync lock is also held by Close, EnforceRetention and
//     DeleteRecordsBefore so no file is removed under a running fsync.
//
// # Ownership
//
// Append patches baseOffset (and, for LogAppendTime topics, attributes,
// maxTimestamp and the CRC) in the caller's records slice and does not
// retain it. Read returns a fresh slice the caller owns; the log is
// always read from files (ReadAt), never cached, so memory does not grow
// with the log. The only per-segment memory is the active segment's
// in-memory index. Each segment keeps its .log open, and a sealed one its
// two index files too (three descriptors per sealed segment).
//
// # Rejected designs
//
//   - A user-space write buffer in front of write(2): the profile of
//     BenchmarkAppend (16 KiB batches) shows nearly all time in the one
//     write(2), i.e. the copy into the page cache, with no allocation;
//     a buffer would add a second copy, lose records Append returned on
//     SIGKILL (interval mode acknowledges them), and force readers to look
//     into it.
//   - Keeping every segment's index in memory: memory would grow with the
//     log (about 1/200 of its size). Sealed indexes are read with ReadAt
//     and served by the page cache.
//   - CRC-checking every segment at Open (Kafka checks only above the
//     recovery point, and so do we): a 10 GiB partition would take seconds
//     to open after a clean shutdown.
//   - Answering ListOffsets by time inside compressed batches: it needs
//     the codecs; for a compressed batch we answer with the batch's first
//     offset and maxTimestamp.
package log
