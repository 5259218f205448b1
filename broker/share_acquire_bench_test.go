package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/sharegroup"
)

// BenchmarkShareAcquire measures the broker's side of draining a share
// group, without clients: eight members take turns fetching (up to 500
// records, as franz-go asks) and accepting what they got, straight
// through sharePart.acquire and shareCoordinator.acknowledge, until the
// 50,000 records of one partition (1 KiB values in 1 MiB batches, keys
// round-robin over 167 message groups: the share of 1,000 groups one of
// sharebench's six partitions gets; uncompressed) are accepted; each iteration drains
// them with a new share group. It reports the process's CPU time per
// record (cpu-ns/rec; the syncs of the acknowledgements' writes are not
// CPU), the steadier figure on a noisy machine, beside the wall time.
// Plain, fair and ordered mode read the same log:
//
//	go test -run X -bench ShareAcquire -benchtime 5x ./broker/
func BenchmarkShareAcquire(bb *testing.B) { benchShareAcquire(bb, 1024, 1<<20) }

// BenchmarkShareAcquireSmallBatches is BenchmarkShareAcquire with 16-byte
// values in batches of up to 16 KiB, as many producers lingering little
// write them: a 1 MiB read then holds some sixty batches.
func BenchmarkShareAcquireSmallBatches(bb *testing.B) { benchShareAcquire(bb, 16, 16<<10) }

func benchShareAcquire(bb *testing.B, valueBytes int, batchBytes int32) {
	const records, groups, members = 50_000, 167, 8
	cfg := DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = bb.TempDir()
	cfg.Logger = zap.NewNop()
	// A sixth of the batch cache, as each of sharebench's six partitions
	// gets: batches are evicted as they are there.
	cfg.ShareBatchCacheBytes = trimCacheBytes / 6
	b, err := Start(cfg)
	require.NoError(bb, err)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("acq"),
		kgo.ProducerBatchMaxBytes(batchBytes), kgo.MaxBufferedRecords(records), kgo.ProducerLinger(50*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	require.NoError(bb, err)
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "acq", 1, 1
	req.Topics = append(req.Topics, rt)
	_, err = req.RequestWith(ctx, cl)
	require.NoError(bb, err)
	value := make([]byte, valueBytes)
	var perr atomic.Value
	for i := range records {
		cl.Produce(ctx, &kgo.Record{Key: []byte("group-" + strconv.Itoa(i%groups)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
		})
	}
	require.NoError(bb, cl.Flush(ctx))
	require.Nil(bb, perr.Load())

	tp := shareTP{topicID: b.topics.Get("acq").ID, partition: 0}
	drains := 0 // each drain a new share group
	_, lp, _ := b.topics.PartitionByID(tp.topicID, 0)
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
				require.NoError(bb, b.shares.incrementalAlterGroupConfigs(group, ops, false))
				st := b.shares.shareSettings(group)
				sp := b.shares.part(shareKey(group, tp))
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
					b.shares.acknowledge(time.Now(), group, st, member, acks)
					require.Zero(bb, acks[0].code, acks[0].msg)
				}
				cpu += processCPU() - start
			}
			bb.ReportMetric(float64(cpu.Nanoseconds())/float64(bb.N*records), "cpu-ns/rec")
		})
	}
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
