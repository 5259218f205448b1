package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
)

// saramaHandler marks every message and signals when all were seen.
type saramaHandler struct {
	mu   sync.Mutex
	seen map[string]bool
	n    int
	done chan struct{}
	once sync.Once
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		h.seen[string(m.Value)] = true
		all := len(h.seen) >= h.n
		h.mu.Unlock()
		s.MarkMessage(m, "")
		if all {
			h.once.Do(func() { close(h.done) })
		}
	}
	return nil
}

func TestGroupSarama(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	const n = 2000
	produceN(t, b, "sar", 4, n)

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "sarama-group-test"
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = 50 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	cfg.Consumer.Return.Errors = true

	h := &saramaHandler{seen: map[string]bool{}, n: n, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var groups []sarama.ConsumerGroup
	for i := 0; i < 2; i++ {
		cg, err := sarama.NewConsumerGroup([]string{b.Addr()}, "sarama-group", cfg)
		require.NoError(t, err)
		groups = append(groups, cg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{"sar"}, h); err != nil && ctx.Err() == nil {
					t.Logf("sarama consume: %v", err)
				}
			}
		}()
		go func() {
			for err := range cg.Errors() {
				t.Logf("sarama group error: %v", err)
			}
		}()
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		t.Fatalf("sarama consumed %d of %d", len(h.seen), n)
	}
	adm := kadm.NewClient(newClient(t, b))
	require.Eventually(t, func() bool { return committedAtEnd(ctx, adm, "sarama-group", "sar") }, 20*time.Second, 50*time.Millisecond)
	cancel()
	wg.Wait()
	for _, cg := range groups {
		require.NoError(t, cg.Close())
	}
	requireCommittedAtEnd(t, b, "sarama-group", "sar")
}

func TestGroupKafkaGo(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	const n = 1000
	produceN(t, b, "kgo-reader", 3, n)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	var readers []*kafka.Reader
	for i := 0; i < 2; i++ {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:           []string{b.Addr()},
			GroupID:           "kafka-go-group",
			Topic:             "kgo-reader",
			StartOffset:       kafka.FirstOffset,
			MaxWait:           100 * time.Millisecond,
			SessionTimeout:    6 * time.Second,
			HeartbeatInterval: 200 * time.Millisecond,
			RebalanceTimeout:  5 * time.Second,
			CommitInterval:    0, // CommitMessages commits synchronously
		})
		readers = append(readers, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				seen[string(m.Value)] = true
				mu.Unlock()
				if err := r.CommitMessages(ctx, m); err != nil && ctx.Err() == nil {
					t.Logf("kafka-go commit: %v", err)
				}
			}
		}()
	}
	adm := kadm.NewClient(newClient(t, b))
	require.Eventually(t, func() bool {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		return got >= n && committedAtEnd(ctx, adm, "kafka-go-group", "kgo-reader")
	}, 50*time.Second, 50*time.Millisecond)
	cancel()
	wg.Wait()
	for _, r := range readers {
		r.Close()
	}
	require.Len(t, seen, n)
	requireCommittedAtEnd(t, b, "kafka-go-group", "kgo-reader")
}
