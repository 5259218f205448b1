package share

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
)

// BenchmarkShareAcquire measures the broker's side of draining a share
// group, without clients: eight members take turns fetching (up to 500
// records, as franz-go asks) and accepting what they got, straight
// through sharePart.acquire and Coordinator.acknowledge, until the
// 50,000 records of one partition (1 KiB values in 1 MiB batches, keys
// round-robin over 167 message groups: the share of 1,000 groups one of
// sharebench's six partitions gets; uncompressed) are accepted; each iteration drains
// them with a new share group. It reports the process's CPU time per
// record (cpu-ns/rec; the syncs of the acknowledgements' writes are not
// CPU), the steadier figure on a noisy machine, beside the wall time.
// Plain, fair and ordered mode read the same log:
//
//	go test -run X -bench ShareAcquire -benchtime 5x ./broker/share/
func BenchmarkShareAcquire(bb *testing.B) { benchShareAcquire(bb, 1024, 1<<20) }

// BenchmarkShareAcquireSmallBatches is BenchmarkShareAcquire with 16-byte
// values in batches of up to 16 KiB, as many producers lingering little
// write them: a 1 MiB read then holds some sixty batches.
func BenchmarkShareAcquireSmallBatches(bb *testing.B) { benchShareAcquire(bb, 16, 16<<10) }

func benchShareAcquire(bb *testing.B, valueBytes int, batchBytes int32) {
	const records, groups, members = 50_000, 167, 8
	// A sixth of the batch cache, as each of sharebench's six partitions
	// gets: batches are evicted as they are there.
	h := newTestShare(bb, "", func(o *Options) {
		o.Logger = zap.NewNop()
		o.BatchCacheBytes = DefaultBatchCacheBytes / 6
	})
	h.createTopic("acq", 1, nil)
	// The records are appended straight to the log (the root benchmark
	// produced them with franz-go, ProducerBatchMaxBytes(batchBytes),
	// uncompressed): batches of at most batchBytes bytes each.
	value := make([]byte, valueBytes)
	var batch []testRecord
	size := protocol.BatchHeaderSize
	for i := range records {
		r := testRecord{key: []byte("group-" + strconv.Itoa(i%groups)), value: value}
		rs := recordSize(len(batch), r)
		if len(batch) > 0 && size+rs > int(batchBytes) {
			h.appendBatch("acq", 0, encodeBatch(batch, batchOpts{}))
			batch, size = batch[:0], protocol.BatchHeaderSize
			rs = recordSize(0, r)
		}
		batch = append(batch, r)
		size += rs
	}
	h.appendBatch("acq", 0, encodeBatch(batch, batchOpts{}))
	require.Equal(bb, int64(records), h.topics.Partition("acq", 0).Log.HighWatermark())

	tp := h.tp("acq", 0)
	drains := 0 // each drain a new share group
	_, lp, _ := h.topics.PartitionByID(tp.topicID, 0)
	for _, mode := range []string{"plain", "fair", "ordered"} {
		bb.Run(mode, func(bb *testing.B) {
			var cpu time.Duration
			for range bb.N {
				drains++
				group := fmt.Sprintf("%s-%d", mode, drains)
				kv := []string{"share.auto.offset.reset", "earliest"}
				if mode != "plain" {
					kv = append(kv, "share.message.group.source", "key", "share.message.group."+mode, "true")
				}
				var ops []kmsg.IncrementalAlterConfigsRequestResourceConfig
				for i := 0; i < len(kv); i += 2 {
					op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
					op.Name, op.Value = kv[i], kmsg.StringPtr(kv[i+1])
					ops = append(ops, op)
				}
				require.NoError(bb, h.c.IncrementalAlterGroupConfigs(group, ops, false))
				st := h.c.shareSettings(group)
				sp := h.c.part(shareKey(group, tp))
				arena := make([]byte, 0, 1<<20)
				start := processCPU()
				for done, idle := 0, 0; done < records; {
					member := "m" + strconv.Itoa(idle%members)
					arena = arena[:0]
					acq, _, err := sp.acquire(st, member, false, lp, 500, sharegroup.BatchOptimized, 1<<30, &arena, nil)
					require.NoError(bb, err)
					if len(acq) == 0 {
						idle++
						require.Less(bb, idle, 1_000_000, "drain stalled at %d records", done)
						continue
					}
					idle++
					var batches []sharegroup.AckBatch
					for _, a := range acq {
						batches = append(batches, sharegroup.AckBatch{First: a.First, Last: a.Last, Types: []sharegroup.AckType{sharegroup.AckAccept}})
						done += int(a.Last - a.First + 1)
					}
					acks := []*shareAck{{tp: tp, batches: batches}}
					h.c.acknowledge(time.Now(), group, st, member, acks)
					require.Zero(bb, acks[0].code, acks[0].msg)
				}
				cpu += processCPU() - start
			}
			bb.ReportMetric(float64(cpu.Nanoseconds())/float64(bb.N*records), "cpu-ns/rec")
		})
	}
}

// recordSize is r's wire size at offset delta i of a batch.
func recordSize(i int, r testRecord) int {
	rec := kmsg.Record{OffsetDelta: int32(i), Key: r.key, Value: r.value, Headers: r.headers}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	return len(rec.AppendTo(nil))
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
