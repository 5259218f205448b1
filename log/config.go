package log

import "math"

// Config holds the topic-level settings of one partition log. Kafka's
// names are in the comments. Every field may be changed at run time with
// Partition.SetConfig; a change applies to the next Append or
// EnforceRetention.
type Config struct {
	// SegmentBytes is segment.bytes: the active segment is rolled before an
	// append would make it larger. Values <= 0 mean the default (1 GiB);
	// values above MaxInt32 are clamped (index positions are 32-bit).
	SegmentBytes int64
	// SegmentMs is segment.ms: a non-empty active segment older than this
	// (measured from the max timestamp of its first batch, as Kafka does)
	// is rolled. Values <= 0 mean the default (7 days).
	SegmentMs int64
	// RetentionMs is retention.ms: whole segments whose largest timestamp
	// is older than this are deleted. < 0 means infinite.
	RetentionMs int64
	// RetentionBytes is retention.bytes: the oldest segments are deleted
	// while the log is larger than this. < 0 means infinite.
	RetentionBytes int64
	// IndexIntervalBytes is index.interval.bytes: bytes of batches between
	// two sparse index entries. 0 indexes every batch; < 0 means the
	// default (4096).
	IndexIntervalBytes int32
	// MaxMessageBytes is max.message.bytes: the largest batch accepted.
	// Values <= 0 mean the default (1048588).
	MaxMessageBytes int32
	// FlushMessages is flush.messages. Informational: the broker uses it in
	// interval fsync mode; the log never fsyncs on its own.
	FlushMessages int64
	// FlushMs is flush.ms. Informational, like FlushMessages.
	FlushMs int64
	// LogAppendTime is message.timestamp.type == "LogAppendTime": Append
	// stamps each batch's maxTimestamp with the append time (recomputing
	// the CRC) and reports it in AppendResult.LogAppendTime.
	LogAppendTime bool
	// ProducerIDExpirationMs is producer.id.expiration.ms: EnforceRetention
	// forgets idempotent producers idle for longer. <= 0 means the default
	// (1 day).
	ProducerIDExpirationMs int64
	// Cleanup is cleanup.policy: CleanupDelete (the zero value) deletes
	// old segments by retention.ms and retention.bytes; CleanupCompact
	// keeps every segment and lets Clean drop superseded records;
	// CleanupCompactDelete does both.
	Cleanup CleanupPolicy
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: Clean's
	// caller cleans a log once its dirty part is at least this share of
	// its cleanable bytes (CleanableInfo.Ratio). Informational here.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms: a record stays
	// uncompacted at least this long (Clean stops before the first
	// segment holding a newer batch).
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms: a log whose dirty part
	// starts with a batch older than this is due for cleaning whatever
	// its dirty ratio (CleanableInfo.Due).
	MaxCompactionLagMs int64
	// DeleteRetentionMs is delete.retention.ms: Clean removes a tombstone
	// (a record with a null value) once its batch's max timestamp is
	// older than this. < 0 keeps tombstones; 0 means 0.
	DeleteRetentionMs int64
	// CheckpointIntervalMs is the broker's
	// log.flush.offset.checkpoint.interval.ms: a Sync rewrites the
	// checkpoint, moving the recovery point to what it made durable, when
	// the last write is older than this, so that recovery after a crash
	// re-reads at most about this much of the log. Rolls, DeleteRecords
	// and Close write it too. 0 means the default (1 minute, Kafka's);
	// < 0 only at those.
	CheckpointIntervalMs int64
	// StartWriteback starts each append's write-out at once (Linux
	// sync_file_range), so the Sync that follows has little left to
	// write. Worth it when every append is soon fsynced (the broker's
	// --fsync=always); otherwise the operating system's own write-back
	// does better, without rewriting partly filled pages.
	StartWriteback bool
	// ZeroAheadBytes, when > 0, keeps up to this many zero bytes written
	// and fsynced ahead of the active segment's data while the
	// partition's fsyncs are small (each covering less than an eighth of
	// it: acknowledgements waiting on single small batches). An fsync of
	// data written over such zeros changes no file metadata, so it skips
	// the file system's journal commit: measured here, an fdatasync of a
	// 4 KiB append is about half as long over zeros as growing the file.
	// Recovery reads a zero tail as the data's end, and a roll or Close
	// cuts it off, so a sealed segment is exactly its batches. Worth it
	// only when every append is soon fsynced (--fsync=always); 0 never
	// writes ahead.
	ZeroAheadBytes int64
	// Replica marks the log of a raft replica (a cluster): Open leaves
	// the high watermark at the log start, for the replica to raise from
	// raft's commit, since the recovered tail may hold entries no
	// majority has, which a later leader can truncate. A single node's
	// Open sets it to the log end (everything recovered is all there
	// is). Such a log is written only through raft (Append,
	// AppendCompacted and WriteMarker return ErrReplicated), and Read
	// leaves raft's own entries out. Read by Open only: SetConfig
	// cannot change it.
	Replica bool
}

// CleanupPolicy is cleanup.policy.
type CleanupPolicy uint8

const (
	CleanupDelete CleanupPolicy = iota
	CleanupCompact
	CleanupCompactDelete
)

// Compacts says whether Clean applies to the log.
func (c CleanupPolicy) Compacts() bool { return c != CleanupDelete }

// Deletes says whether retention.ms and retention.bytes apply.
func (c CleanupPolicy) Deletes() bool { return c != CleanupCompact }

// maxSegmentMs is how old the active segment may grow before a roll:
// segment.ms, or max.compaction.lag.ms if lower on a compacted log (as
// Kafka's LogConfig.maxSegmentMs: the active segment is never cleaned,
// so a record must leave it for the lag to be honoured).
func (c *Config) maxSegmentMs() int64 {
	if c.Cleanup.Compacts() && c.MaxCompactionLagMs > 0 {
		return min(c.SegmentMs, c.MaxCompactionLagMs)
	}
	return c.SegmentMs
}

// Defaults, as in Kafka.
const (
	DefaultSegmentBytes           = 1 << 30
	DefaultSegmentMs              = 7 * 24 * 60 * 60 * 1000
	DefaultRetentionMs            = 7 * 24 * 60 * 60 * 1000
	DefaultIndexIntervalBytes     = 4096
	DefaultMaxMessageBytes        = 1048588
	DefaultProducerIDExpirationMs = 24 * 60 * 60 * 1000
	DefaultCheckpointIntervalMs   = 60 * 1000
	DefaultMinCleanableDirtyRatio = 0.5
	DefaultDeleteRetentionMs      = 24 * 60 * 60 * 1000
	DefaultMaxCompactionLagMs     = math.MaxInt64
	// DefaultZeroAheadBytes is ZeroAheadBytes in DefaultConfig.
	DefaultZeroAheadBytes = 256 << 10
)

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           DefaultSegmentBytes,
		SegmentMs:              DefaultSegmentMs,
		RetentionMs:            DefaultRetentionMs,
		RetentionBytes:         -1,
		IndexIntervalBytes:     DefaultIndexIntervalBytes,
		MaxMessageBytes:        DefaultMaxMessageBytes,
		FlushMessages:          math.MaxInt64,
		FlushMs:                math.MaxInt64,
		ProducerIDExpirationMs: DefaultProducerIDExpirationMs,
		CheckpointIntervalMs:   DefaultCheckpointIntervalMs,
		MinCleanableDirtyRatio: DefaultMinCleanableDirtyRatio,
		DeleteRetentionMs:      DefaultDeleteRetentionMs,
		MaxCompactionLagMs:     DefaultMaxCompactionLagMs,
		ZeroAheadBytes:         DefaultZeroAheadBytes,
	}
}

// normalized replaces out-of-range values as documented on the fields.
func (c Config) normalized() Config {
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentBytes > math.MaxInt32 {
		c.SegmentBytes = math.MaxInt32
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = DefaultSegmentMs
	}
	if c.IndexIntervalBytes < 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.ProducerIDExpirationMs <= 0 {
		c.ProducerIDExpirationMs = DefaultProducerIDExpirationMs
	}
	if c.MaxCompactionLagMs <= 0 {
		c.MaxCompactionLagMs = DefaultMaxCompactionLagMs
	}
	if c.CheckpointIntervalMs == 0 {
		c.CheckpointIntervalMs = DefaultCheckpointIntervalMs
	}
	return c
}
