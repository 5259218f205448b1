// Package dedup is the dedup window (issue 5): topic configs that make Produce drop a
// record whose dedup id was already appended to the topic within the
// last dedup.window.ms, while answering the producer with success.
//
//   - dedup.window.ms: 0 (the default) turns it off; SQS FIFO queues use
//     5 minutes (300000). At most 7 days.
//   - dedup.key: header:NAME (default header:dedup-id) takes the id from
//     the record's first header NAME (records without it, or with an
//     empty value, are never duplicates); content takes a SHA-256 of the
//     record's key and value (a null key or value is not an empty one).
//   - dedup.scope: topic (default): one id space per topic, across its
//     partitions; message-group: ids are compared within the message
//     group named by the header dedup.message.group.header (default
//     message-group-id; records without it share the empty group).
//
// # How
//
// Each topic has one dedup table (Window, by topic id): id → expiry, plus a FIFO
// of insertions for expiry. A produce to a topic with a window decodes its
// batches (decompressing them), looks every id up and inserts the new
// ones under the table's mutex, so two concurrent produces of one id,
// even to different partitions, keep exactly one. A batch without
// duplicates is appended verbatim. A batch with duplicates is rewritten
// without them: same header (offset span, producer id, epoch, sequence,
// timestamps), uncompressed, fewer records than its span (a batch with
// every record dropped keeps none), appended with log.AppendCompacted.
// The dropped offsets are holes, exactly like offsets removed by Kafka's
// log compaction (KAFKA-5443), which every client already skips; keeping
// the span keeps idempotent producers' sequence numbers intact, so a
// retried batch is still recognised by the producer state. If the
// append fails, the ids it inserted are removed again.
//
// The live window is measured on the broker's clock at append time. The
// table is not persisted: it is rebuilt from the log, lazily at the first
// produce after a start or a config change, by reading every partition
// from the first record whose timestamp is within the window
// (OffsetForTimestamp) to its end and giving each id the expiry
// record timestamp + window. After a restart the window therefore
// follows the records' timestamps (CreateTime, set by producers).
//
// # Cost
//
// Topics without a window pay one config lookup per produce partition;
// their batches stay zero-copy. With a window every batch is decoded
// (compressed ones decompressed) and hashed in content mode; a batch with
// duplicates is re-encoded uncompressed; the table holds every id of the
// window in memory (roughly 80 bytes plus the id per record), and the
// first produce after a restart or config change reads the window back
// from the log.
//
// Transactional batches are neither deduplicated nor remembered: the ids
// of a transaction that later aborts would otherwise drop its committed
// retry, and transactional producers are idempotent already.
//
// A duplicate is answered only once its first copy is durable: the
// table remembers, with each id, the append that inserted it
// (write), and a produce that drops a duplicate waits for that
// append and then for its fsync, in whichever partition it went to, on
// top of its own. If the first copy's append failed, its ids were
// removed again and the duplicate gets that append's error, so the
// client's retry stores it; if its fsync failed, the ids are forgotten
// the same way (by whichever produce sees the failure first). A rebuild
// reads the log to its end: ids of records above the high watermark (not
// yet fsynced) point at a write done once the log end is durable.
//
// # Locks
//
// Window.mu guards only the map of tables, by topic id (a leaf).
// topicTable.mu guards one topic's ids and is held during a produce's
// lookup and insertion and during a rebuild, which reads that topic's
// logs (only its produces wait) and takes topics.Registry.mu briefly.
// Neither is held while waiting for an append or an fsync. Append may be
// called under no lock of Shoal's (it is the produce path's); Forget
// under the topic Admin's lock.
package dedup
