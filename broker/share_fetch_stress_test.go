package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
)

// TestShareFetchRecordsMatchUnderLoad: several members of a plain and of an
// ordered message-group share group fetch many partitions at once,
// concurrently and over shared connections; every acquired offset must be
// in the response's records with the value it was produced with.
func TestShareFetchRecordsMatchUnderLoad(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	const parts, perPart = 4, 3000
	createTopicRaw(t, b, "st", parts)
	cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	keys := []string{"a", "b", "c", "d", "e", "f", "g"}
	for round := 0; round < 30; round++ {
		var recs []*kgo.Record
		for p := 0; p < parts; p++ {
			for i := 0; i < perPart/30; i++ {
				off := round*(perPart/30) + i
				recs = append(recs, &kgo.Record{Topic: "st", Partition: int32(p), Key: []byte(keys[(off*7+p)%len(keys)]),
					Value: []byte(fmt.Sprintf("%d/%d/%0200d", p, off, off))})
			}
		}
		produceAll(t, cl, recs...)
	}
	setShareGroupConfigs(t, b, "plain", "share.auto.offset.reset", "earliest")
	setShareGroupConfigs(t, b, "ord", "share.auto.offset.reset", "earliest",
		"share.message.group.source", "key", "share.message.group.ordered", "true")
	topicID := b.topics.Get("st").ID

	fc, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	require.NoError(t, err)
	t.Cleanup(fc.Close)

	var wg sync.WaitGroup
	for _, group := range []string{"plain", "ord"} {
		for m := 0; m < 3; m++ {
			wg.Add(1)
			go func(group, member string, seed uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, 9))
				epoch := int32(0)
				acks := map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{}
				empty, total := 0, 0
				defer func() { t.Logf("%s/%s: %d records", group, member, total) }()
				for iter := 0; iter < 1500 && empty < 30; iter++ {
					req := kmsg.NewPtrShareFetchRequest()
					req.Version = 2
					req.GroupID, req.MemberID = &group, &member
					req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes = epoch, int32(rng.IntN(30)), 1
					req.MaxBytes = int32(1000 + rng.IntN(200000))
					req.MaxRecords = int32(1 + rng.IntN(300))
					req.BatchSize = req.MaxRecords
					if rng.IntN(2) == 0 {
						req.ShareAcquireMode = 1
					}
					rt := kmsg.NewShareFetchRequestTopic()
					rt.TopicID = topicID
					for p := int32(0); p < parts; p++ {
						rp := kmsg.NewShareFetchRequestTopicPartition()
						rp.Partition = p
						rp.AcknowledgementBatches = acks[p]
						rt.Partitions = append(rt.Partitions, rp)
					}
					req.Topics = append(req.Topics, rt)
					acks = map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{}
					ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
					r, err := fc.SeedBrokers()[0].Request(ctx, req)
					cancel()
					if err != nil {
						t.Errorf("%s/%s: %v", group, member, err)
						return
					}
					resp := r.(*kmsg.ShareFetchResponse)
					if resp.ErrorCode != 0 {
						t.Errorf("%s/%s: error %d", group, member, resp.ErrorCode)
						return
					}
					epoch++
					got := 0
					for _, tt := range resp.Topics {
						for _, p := range tt.Partitions {
							if len(p.AcquiredRecords) == 0 {
								continue
							}
							vals := map[int64]string{}
							raw := p.Records
							for len(raw) > 0 {
								var rb kmsg.RecordBatch
								if err := rb.ReadFrom(raw); err != nil {
									t.Errorf("%s/%s p%d: batch: %v", group, member, p.Partition, err)
									return
								}
								size := 12 + int(rb.Length)
								if err := records.EachRecord(raw[:size], func(off, _ int64, r *kmsg.Record, _ []byte) bool {
									vals[off] = string(r.Value)
									return true
								}); err != nil {
									t.Errorf("%s/%s p%d: records: %v", group, member, p.Partition, err)
									return
								}
								raw = raw[size:]
							}
							for _, a := range p.AcquiredRecords {
								types := []int8{}
								for o := a.FirstOffset; o <= a.LastOffset; o++ {
									want := fmt.Sprintf("%d/%d/%0200d", p.Partition, o, o)
									if vals[o] != want {
										t.Errorf("%s/%s iter %d p%d: offset %d acquired (%d..%d) but value %.20q", group, member, iter, p.Partition, o, a.FirstOffset, a.LastOffset, vals[o])
										return
									}
									typ := int8(1)
									if rng.IntN(10) == 0 {
										typ = 2 // release
									}
									types = append(types, typ)
									got++
								}
								acks[p.Partition] = append(acks[p.Partition], ackBatch(a.FirstOffset, a.LastOffset, types...))
							}
						}
					}
					total += got
					if got == 0 {
						empty++
					} else {
						empty = 0
					}
				}
			}(group, fmt.Sprintf("m%d", m), uint64(m*31+len(group)))
		}
	}
	wg.Wait()
}
