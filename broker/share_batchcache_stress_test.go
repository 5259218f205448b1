package broker

// Stress tests for the batch cache's reuse of read buffers (e712dae): a
// buffer handed out again while a fetch or a response still reads the
// batch in it would send other records, trimmed under a fresh CRC. Their
// length can be raised with SHOAL_STRESS_SECONDS (seconds per part). They
// come from a review of that change.
//
// The tests that drive the batch cache and share-partitions directly
// (TestBatchCacheAcquireStress, TestTrimCacheConcurrent,
// TestTrimCacheKeepsOnlyUsualBuffers) are in package share
// (share/batchcache_stress_test.go); this one goes through the wire.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// stressValue is the value of the record produced i-th (at offset i): its
// index and pseudo-random padding derived from it: runs of one letter,
// so that a compressed topic's batches are compressed (franz-go keeps
// a compressed batch only when it is smaller).
func stressValue(i int64) []byte {
	rng := rand.New(rand.NewSource(i*7919 + 17))
	n := 100 + rng.Intn(2500)
	v := make([]byte, 0, n+12)
	v = strconv.AppendInt(v, i, 10)
	v = append(v, '|')
	for len(v) < n {
		c := byte('a' + rng.Intn(26))
		for range min(1+rng.Intn(16), n-len(v)) {
			v = append(v, c)
		}
	}
	return v
}

func stressCheck(off int64, v []byte) error {
	if !bytes.Equal(v, stressValue(off)) {
		p := v
		if len(p) > 24 {
			p = p[:24]
		}
		return fmt.Errorf("offset %d: value %q... (len %d) is not its own", off, p, len(v))
	}
	return nil
}

func stressDuration(def time.Duration) time.Duration {
	if s := os.Getenv("SHOAL_STRESS_SECONDS"); s != "" {
		n, _ := strconv.Atoi(s)
		return time.Duration(n) * time.Second
	}
	return def
}

// stressProduce creates topic (one partition, small segments) and produces n
// records in chunks of random size (batches from one record to 1 MiB),
// keys over groups message groups, values stressValue(offset).
func stressProduce(t *testing.T, b *Broker, topic string, codec kgo.CompressionCodec, n, groups int) {
	t.Helper()
	_, err := b.topicAdmin.Create(topic, 1, map[string]string{"segment.bytes": strconv.Itoa(3 << 20)}, false)
	require.NoError(t, err)
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(n), kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(0))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewSource(int64(len(topic))))
	for i := 0; i < n; {
		k := 1 + rng.Intn(1200)
		if rng.Intn(3) == 0 {
			k = 1 + rng.Intn(5)
		}
		var recs []*kgo.Record
		run := rng.Intn(2) == 0 // the chunk's records all of one group: whole batches, sent without a copy
		runKey := rng.Intn(groups)
		for ; k > 0 && i < n; k, i = k-1, i+1 {
			key := i % groups // interleaved: trimmed batches
			if run {
				key = runKey
			}
			recs = append(recs, &kgo.Record{Key: []byte("g" + strconv.Itoa(key)), Value: stressValue(int64(i))})
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
	// The log holds the batches as sent: compressed ones for a codec.
	lg := b.topics.Partition(topic, 0).Log
	raw, err := lg.Read(0, lg.HighWatermark(), 1<<20, true)
	require.NoError(t, err)
	require.Greater(t, len(raw), 23)
	attrs := int16(binary.BigEndian.Uint16(raw[21:23]))
	require.Equal(t, codec != kgo.NoCompression(), attrs&7 != 0, "first batch's codec bits %d", attrs&7)
}

// TestBatchCacheClientsStress: franz-go share consumers (ordered and fair,
// several members each) read compressed and uncompressed topics through
// the wire with a small batch cache; every record's value must be its
// offset's.
func TestBatchCacheClientsStress(t *testing.T) {
	t.Parallel()
	b := startShareTest(t, func(c *Config) { c.ShareBatchCacheBytes = 3 << 20 / 2 })
	const n, ngroups = 2500, 29
	topics := map[string]kgo.CompressionCodec{"cu": kgo.NoCompression(), "cz": kgo.ZstdCompression()}
	for name, codec := range topics {
		stressProduce(t, b, name, codec, n, ngroups)
	}
	dur := stressDuration(3 * time.Second)
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	var total, bad atomic.Int64
	var mu sync.Mutex
	var firstBad string
	round := 0
	for time.Now().Before(deadline) {
		round++
		for name := range topics {
			for _, mode := range []string{"ordered", "fair"} {
				group := fmt.Sprintf("c-%s-%s-%d", name, mode, round)
				setShareGroupConfigs(t, b, group, "share.auto.offset.reset", "earliest",
					"share.message.group.source", "key", "share.message.group."+mode, "true")
				var seen sync.Map
				var count atomic.Int64
				for m := 0; m < 3; m++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						cl := newShareClient(t, b, group, kgo.ConsumeTopics(name), kgo.FetchMaxWait(100*time.Millisecond))
						defer cl.Close()
						rng := rand.New(rand.NewSource(int64(m)))
						for count.Load() < n && time.Now().Before(deadline.Add(5*time.Second)) {
							for _, r := range pollShare(t, cl, time.Second) {
								total.Add(1)
								if err := stressCheck(r.Offset, r.Value); err != nil {
									bad.Add(1)
									mu.Lock()
									if firstBad == "" {
										firstBad = fmt.Sprintf("%s %s: %v", name, mode, err)
									}
									mu.Unlock()
								}
								if rng.Intn(6) == 0 && r.DeliveryCount() < 3 {
									r.Ack(kgo.AckRelease)
									continue
								}
								if _, dup := seen.LoadOrStore(r.Offset, true); !dup {
									count.Add(1)
								}
								r.Ack(kgo.AckAccept)
							}
						}
					}()
				}
			}
		}
		wg.Wait()
	}
	t.Logf("%d rounds, %d records received, %d wrong", round, total.Load(), bad.Load())
	require.Zero(t, bad.Load(), firstBad)
}
