package integration

// Lost responses and retries (docs reliability T4): idempotent producers
// talk to the broker through a TCP proxy that, for a fraction of Produce
// responses, drops the response and closes the connection, forwards half
// of it and closes, or holds it past the client's request timeout. The
// client cannot tell whether such a produce was stored and retries it
// with the same producer id, epoch and sequence; the broker must answer a
// retry of any of the last five batches with its original offsets and
// store nothing twice. Pass: every record acknowledged, each value stored
// exactly once at the offset its acknowledgement gave, each producer's
// records in order within a partition.

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mq/shoal/broker"
)

// faultProxy forwards Kafka connections to target, injecting faults on
// Produce responses while on.
type faultProxy struct {
	ln     net.Listener
	target string
	rate   float64       // chance of a fault per Produce response
	hold   time.Duration // how long a held response waits
	on     atomic.Bool

	mu  sync.Mutex
	rng *rand.Rand
	wg  sync.WaitGroup

	dropped, cut, held, produces atomic.Int64
}

func newFaultProxy(t *testing.T, rate float64, hold time.Duration) *faultProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultProxy{ln: ln, rate: rate, hold: hold, rng: rand.New(rand.NewPCG(1, 2))}
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) start(target string) {
	p.target = target
	p.wg.Go(func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(c) })
		}
	})
}

// fault picks what happens to one Produce response: 0 none, 1 drop, 2 cut,
// 3 hold.
func (p *faultProxy) fault() int {
	if !p.on.Load() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rng.Float64() >= p.rate {
		return 0
	}
	switch r := p.rng.IntN(10); {
	case r < 5:
		return 1
	case r < 9:
		return 2
	default:
		return 3
	}
}

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 200<<20 {
		return nil, fmt.Errorf("frame of %d bytes", size)
	}
	buf := make([]byte, 4+size)
	copy(buf, n[:])
	_, err := io.ReadFull(r, buf[4:])
	return buf, err
}

func (p *faultProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	// Responses come back in request order: the API keys of the requests
	// forwarded, oldest first, name them.
	keys := make(chan int16, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer server.Close()
		for {
			f, err := readFrame(client)
			if err != nil || len(f) < 8 {
				return
			}
			keys <- int16(binary.BigEndian.Uint16(f[4:6]))
			if _, err := server.Write(f); err != nil {
				return
			}
		}
	}()
	defer func() { client.Close(); <-done }()
	for {
		f, err := readFrame(server)
		if err != nil {
			return
		}
		var key int16
		select {
		case key = <-keys:
		case <-done:
			return
		}
		if key == 0 {
			p.produces.Add(1)
			switch p.fault() {
			case 1: // the request was forwarded and handled; its answer is lost
				p.dropped.Add(1)
				return
			case 2: // half an answer, then the connection breaks
				p.cut.Add(1)
				_, _ = client.Write(f[:len(f)/2])
				return
			case 3: // an answer later than the client waits for
				p.held.Add(1)
				time.Sleep(p.hold)
			}
		}
		if _, err := client.Write(f); err != nil {
			return
		}
	}
}

func TestLostProduceResponses(t *testing.T) {
	t.Parallel()
	const (
		producers  = 4
		perProd    = 20000 // about 20,000 produce requests
		partitions = 4
	)
	proxy := newFaultProxy(t, 0.02, 1200*time.Millisecond)
	b := startBroker(t, func(c *broker.Config) { c.AdvertisedAddr = proxy.addr() })
	b.requireInProcess(t)
	proxy.start(b.Addr)
	topic := b.createTopic(t, partitions, nil)
	ctx := testContext(t)

	type ack struct {
		partition int32
		offset    int64
	}
	acks := make([]map[string]ack, producers)
	var mu sync.Mutex
	var failed atomic.Int64
	pad := strings.Repeat("x", 400)
	proxy.on.Store(true)
	var wg sync.WaitGroup
	for id := range producers {
		acks[id] = make(map[string]ack, perProd)
		cl := b.client(t,
			kgo.SeedBrokers(proxy.addr()),
			kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.MaxBufferedRecords(64),
			kgo.ProducerBatchMaxBytes(512), // with pad, one record per batch: many requests
			kgo.ProduceRequestTimeout(700*time.Millisecond),
			kgo.RequestTimeoutOverhead(300*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }),
			kgo.RecordDeliveryTimeout(60*time.Second),
		)
		wg.Go(func() {
			for seq := range perProd {
				name := fmt.Sprintf("p%d-%d", id, seq)
				r := &kgo.Record{Value: []byte(name + " " + pad), Partition: int32(seq % partitions)}
				cl.Produce(ctx, r, func(r *kgo.Record, err error) {
					if err != nil {
						if failed.Add(1) <= 5 {
							t.Errorf("produce %s: %v", name, err)
						}
						return
					}
					mu.Lock()
					acks[id][name] = ack{r.Partition, r.Offset}
					mu.Unlock()
				})
			}
			require.NoError(t, cl.Flush(ctx))
		})
	}
	wg.Wait()
	proxy.on.Store(false)
	t.Logf("produce responses %d: dropped %d, cut %d, held %d", proxy.produces.Load(), proxy.dropped.Load(), proxy.cut.Load(), proxy.held.Load())
	require.Zero(t, failed.Load(), "every record is acknowledged")
	require.Positive(t, proxy.dropped.Load()+proxy.cut.Load(), "the proxy injected faults")

	recs := b.consumeN(t, topic, producers*perProd)
	require.Len(t, recs, producers*perProd)
	seen := map[string]bool{}
	last := map[[2]int]int{} // (producer, partition) -> last seq read
	for _, r := range recs {
		v, _, _ := strings.Cut(string(r.Value), " ")
		require.False(t, seen[v], "%s stored twice (partition %d offset %d)", v, r.Partition, r.Offset)
		seen[v] = true
		var id, seq int
		_, err := fmt.Sscanf(v, "p%d-%d", &id, &seq)
		require.NoError(t, err, "value %q", v)
		a, ok := acks[id][v]
		require.True(t, ok, "%s was stored but never acknowledged", v)
		require.Equal(t, ack{r.Partition, r.Offset}, a, "%s is stored where its acknowledgement said", v)
		k := [2]int{id, int(r.Partition)}
		if prev, ok := last[k]; ok {
			require.Greater(t, seq, prev, "producer %d's records are in order in partition %d", id, r.Partition)
		}
		last[k] = seq
	}
}
