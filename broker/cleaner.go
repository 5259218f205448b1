package broker

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

// The log cleaner (cleanup.policy=compact): a loop that, every
// log.cleaner.backoff.ms while nothing is due, picks the compacted
// partitions whose dirty ratio reaches min.cleanable.dirty.ratio (or
// whose oldest dirty record passed max.compaction.lag.ms), dirtiest
// first, and cleans up to log.cleaner.threads of them at once (package
// log, Partition.Clean), each with its share of
// log.cleaner.dedupe.buffer.size as offset map, all together throttled
// to log.cleaner.io.max.bytes.per.second. Its configs are dynamic
// broker configs, as Kafka's are, read at every round.

// cleanerBrokerConfigDefs are the cleaner's broker configs (dynamic).
var cleanerBrokerConfigDefs = []brokerConfigDef{
	{name: "log.cleaner.threads", typ: kmsg.ConfigTypeInt, def: "1", check: configs.IntRange(0, 64),
		doc: "Partitions cleaned at once (0: no cleaning)."},
	{name: "log.cleaner.dedupe.buffer.size", typ: kmsg.ConfigTypeLong, def: "134217728", check: configs.IntRange(1<<16, math.MaxInt64),
		doc: "Memory for the cleaners' offset maps, all threads together (24 bytes per key); allocated when a compacted log is first cleaned."},
	{name: "log.cleaner.io.buffer.load.factor", typ: kmsg.ConfigTypeDouble, def: "0.9", check: configs.FloatRange(0.01, 1),
		doc: "How full an offset map gets before a pass stops and leaves the rest for the next."},
	{name: "log.cleaner.io.max.bytes.per.second", typ: kmsg.ConfigTypeDouble, def: "1.7976931348623157E308", check: configs.FloatRange(1, math.MaxFloat64),
		doc: "Bytes the cleaners read and write per second, all together."},
	{name: "log.cleaner.backoff.ms", typ: kmsg.ConfigTypeLong, def: "15000", check: configs.IntRange(0, math.MaxInt64),
		doc: "How long the cleaner sleeps when no log needs cleaning."},
}

func (b *Broker) cleanerInt(name string) int64 {
	v, ok := b.brokerConfig(name)
	if !ok {
		v = brokerConfigByName[name].def
	}
	return configs.Int(v, configs.Int(brokerConfigByName[name].def, 0))
}

func (b *Broker) cleanerFloat(name string) float64 {
	v, ok := b.brokerConfig(name)
	if !ok {
		v = brokerConfigByName[name].def
	}
	return configs.Float(v, configs.Float(brokerConfigByName[name].def, 0))
}

// recordsCodec is the broker's codecs for the cleaner.
type recordsCodec struct{}

func (recordsCodec) Decompress(dst, src []byte, c protocol.Compression) ([]byte, error) {
	return records.DecompressAppend(dst, src, c, records.MaxDecompressed)
}

func (recordsCodec) Compress(raw []byte, c protocol.Compression) ([]byte, error) {
	return records.Compress(raw, c)
}

// ioThrottle holds the cleaners to a byte rate, measured over windows
// of about a second (Kafka's Throttler does the same).
type ioThrottle struct {
	mu    sync.Mutex
	rate  float64
	start time.Time
	bytes float64
}

func (t *ioThrottle) setRate(r float64) {
	t.mu.Lock()
	t.rate = r
	t.mu.Unlock()
}

func (t *ioThrottle) wait(n int, cancel <-chan struct{}) {
	t.mu.Lock()
	now := time.Now()
	if t.start.IsZero() || now.Sub(t.start) > time.Second {
		t.start, t.bytes = now, 0
	}
	t.bytes += float64(n)
	var sleep time.Duration
	if t.rate > 0 && t.rate < 1e18 {
		if due := time.Duration(t.bytes / t.rate * float64(time.Second)); due > now.Sub(t.start) {
			sleep = due - now.Sub(t.start)
		}
	}
	t.mu.Unlock()
	if sleep > 0 {
		tm := time.NewTimer(sleep)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-cancel: // shutting down: Clean sees it at its next batch
		}
	}
}

// cleanerState is the loop's memory: offset maps kept between rounds.
type cleanerState struct {
	maps     []*slog.OffsetMap
	mapBytes int64
	load     float64
	throttle ioThrottle
}

func (b *Broker) cleanerLoop() {
	st := &cleanerState{}
	for {
		backoff := time.Duration(b.cleanerInt("log.cleaner.backoff.ms")) * time.Millisecond
		cleaned := b.cleanRound(st, time.Now())
		if cleaned {
			backoff = 0
		}
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(max(backoff, 10*time.Millisecond)):
		}
	}
}

// cleanCandidate is a partition due for cleaning.
type cleanCandidate struct {
	p    *topics.Partition
	info slog.CleanableInfo
}

// cleanRound cleans the dirtiest due partitions once; it reports whether
// it cleaned anything.
func (b *Broker) cleanRound(st *cleanerState, now time.Time) bool {
	threads := int(b.cleanerInt("log.cleaner.threads"))
	if threads <= 0 || b.cluster != nil {
		return false
	}
	var due []cleanCandidate
	for _, t := range b.topics.All() {
		parts, _ := b.topics.Snapshot(t)
		for _, p := range parts {
			cfg := p.Log.Config()
			if !cfg.Cleanup.Compacts() {
				continue
			}
			info := p.Log.Cleanable(now)
			b.metrics.CleanerDirty(p.Topic, p.Index, info.Ratio)
			if info.Uncleanable == nil && ((info.End > info.FirstDirty && (info.Ratio >= cfg.MinCleanableDirtyRatio || info.Due)) || info.TombstonesDue) {
				due = append(due, cleanCandidate{p, info})
			}
		}
	}
	if len(due) == 0 {
		return false
	}
	sort.Slice(due, func(i, j int) bool { return due[i].info.Ratio > due[j].info.Ratio })
	if len(due) > threads {
		due = due[:threads]
	}
	// Offset maps: the buffer shared by the threads, reallocated only
	// when the configs change.
	bytes := b.cleanerInt("log.cleaner.dedupe.buffer.size") / int64(threads)
	load := b.cleanerFloat("log.cleaner.io.buffer.load.factor")
	if len(st.maps) != threads || st.mapBytes != bytes || st.load != load {
		st.maps = make([]*slog.OffsetMap, threads)
		st.mapBytes, st.load = bytes, load
	}
	st.throttle.setRate(b.cleanerFloat("log.cleaner.io.max.bytes.per.second"))
	var wg sync.WaitGroup
	var cleaned atomic.Bool
	for i, c := range due {
		if st.maps[i] == nil {
			st.maps[i] = slog.NewOffsetMap(bytes, load)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b.cleanPartition(c, st.maps[i], &st.throttle, now) {
				cleaned.Store(true)
			}
		}()
	}
	wg.Wait()
	return cleaned.Load()
}

// cleanPartition cleans one partition once and reports whether the
// clean got anywhere (a failed one marks the log uncleanable, so the
// loop backs off instead of retrying it at once).
func (b *Broker) cleanPartition(c cleanCandidate, m *slog.OffsetMap, th *ioThrottle, now time.Time) bool {
	start := time.Now()
	wait := func(n int) { th.wait(n, b.ctx.Done()) }
	stats, err := c.p.Log.Clean(slog.CleanOptions{Now: now, Map: m, Codec: recordsCodec{}, Throttle: wait, Cancel: b.ctx.Done()})
	b.metrics.CleanerRun(stats.BytesRead, stats.BytesWritten, time.Since(start), err != nil)
	if err != nil {
		b.lg.Error("log cleaning failed", zapPartition(c.p), zapErr(err))
		return false
	}
	if stats.Segments > 0 {
		b.metrics.CleanerCleaned(c.p.Topic, c.p.Index, time.Now())
		b.lg.Info("cleaned log", zapPartition(c.p), zap.Int64("first_dirty", stats.FirstDirty), zap.Int64("end", stats.End),
			zap.Int("segments", stats.Segments), zap.Int64("bytes_read", stats.BytesRead), zap.Int64("bytes_written", stats.BytesWritten),
			zap.Int64("records_removed", stats.Removed), zap.Int64("tombstones_removed", stats.Tombstones), zap.Int64("markers_removed", stats.Markers),
			zap.Int("segments_merged", stats.Merged), zap.Duration("took", time.Since(start)))
	}
	return stats.End > stats.FirstDirty
}

// compactedRecordsError checks a produce's batches for a compacted
// topic, as Kafka's LogValidator does: every record needs a key
// (INVALID_RECORD), and every record must decode, compressed batches
// included (CORRUPT_MESSAGE): the cleaner reads every record, and one it
// cannot read would stop the partition's cleaning for good. It sets the
// error on sp and reports whether it did. Framing the log validates
// itself (SplitBatches, header, CRC) is left to it.
func compactedRecordsError(recs []byte, topic string, partition int32, sp *kmsg.ProduceResponseTopicPartition) bool {
	batches, err := protocol.SplitBatches(recs)
	if err != nil {
		return false
	}
	fail := func(code int16, msg string) bool {
		sp.ErrorCode, sp.ErrorMessage = code, &msg
		return true
	}
	var buf []byte
	for _, batch := range batches {
		h, err := protocol.ParseBatchHeader(batch)
		if err != nil || h.Size() > int64(len(batch)) || !protocol.VerifyBatchCRC(batch) {
			return false
		}
		body := batch[protocol.BatchHeaderSize:h.Size()]
		if c := h.Compression(); c != protocol.CompressionNone {
			if buf, err = records.DecompressAppend(buf[:0], body, c, records.MaxDecompressed); err != nil {
				return fail(kerr.CorruptMessage.Code, fmt.Sprintf("A compressed record batch for %s-%d does not decompress: %v", topic, partition, err))
			}
			body = buf
		}
		keyless := false
		if err := protocol.EachRawRecord(body, h.RecordCount, func(r *protocol.RawRecord) error {
			keyless = keyless || r.KeyNull
			return nil
		}); err != nil {
			return fail(kerr.CorruptMessage.Code, fmt.Sprintf("Records of a batch for %s-%d do not decode: %v", topic, partition, err))
		}
		if keyless {
			return fail(kerr.InvalidRecord.Code, "Compacted topic cannot accept message without key in topic partition "+topic+"-"+strconv.Itoa(int(partition))+".")
		}
	}
	return false
}

// compactedTopic says whether cfgs (a topic's overrides) make it
// compacted.
func (b *Broker) compactedTopic(cfgs map[string]string) bool {
	v, _ := b.topicConfigValue(cfgs, "cleanup.policy")
	compact, _, _ := configs.CleanupPolicy(v)
	return compact
}
