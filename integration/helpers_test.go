package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/shoal-mq/shoal/broker"
)

// seedsEnv points the suite at an external cluster (see doc.go).
const seedsEnv = "SHOAL_TEST_SEEDS"

// testTimeout bounds each test's context. Tests are meant to take seconds;
// the bound is generous because CI runs them under -race on two cores.
const testTimeout = 90 * time.Second

// testBroker is the broker one test talks to.
type testBroker struct {
	// Addr is the first seed, host:port.
	Addr string
	// Seeds are all seeds (one for an in-process broker).
	Seeds []string
	// External is true when SHOAL_TEST_SEEDS chose the broker.
	External bool
	// SQSAddr is the SQS API's address (withSQS), in-process only.
	SQSAddr string

	close     func() error // in-process only
	closeOnce sync.Once
}

// brokerOption adjusts the in-process broker's configuration.
type brokerOption func(*broker.Config)

// withSQS serves the SQS API on a free port (testBroker.SQSAddr).
func withSQS() brokerOption { return func(c *broker.Config) { c.SQSAddr = "127.0.0.1:0" } }

func withAutoCreateTopics(on bool) brokerOption {
	return func(c *broker.Config) { c.AutoCreateTopics = on }
}

func withDefaultPartitions(n int32) brokerOption {
	return func(c *broker.Config) { c.DefaultPartitions = n }
}

// withDataDir makes the broker use dir, so a test can restart a broker on
// the same data.
func withDataDir(dir string) brokerOption {
	return func(c *broker.Config) { c.DataDir = dir }
}

func withMaxRequestBytes(n int32) brokerOption {
	return func(c *broker.Config) { c.MaxRequestBytes = n }
}

func externalSeeds() []string {
	var seeds []string
	for _, s := range strings.Split(os.Getenv(seedsEnv), ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// startBroker starts a broker on 127.0.0.1:0 with a fresh data directory and
// closes it when the test ends. With SHOAL_TEST_SEEDS set it returns the
// external cluster instead; a test that passes options needs a broker it
// configures itself and is skipped in that mode.
func startBroker(t *testing.T, opts ...brokerOption) *testBroker {
	t.Helper()
	if seeds := externalSeeds(); len(seeds) > 0 {
		if len(opts) > 0 {
			t.Skipf("needs an in-process broker with a test-specific config; %s is set", seedsEnv)
		}
		return &testBroker{Addr: seeds[0], Seeds: seeds, External: true}
	}

	cfg := broker.DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	logs := &lockedBuffer{}
	cfg.Logger = zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		zapcore.AddSync(logs),
		testLogLevel(),
	))
	for _, o := range opts {
		o(&cfg)
	}

	// Registered first so it runs last: after Close, show the broker's log
	// if the test failed.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker log (last 150 lines):\n%s", tailLines(logs.String(), 150))
		}
	})

	b, err := broker.Start(cfg)
	require.NoError(t, err, "broker.Start")
	addr := b.Addr()
	require.NotEmpty(t, addr, "broker.Addr")
	tb := &testBroker{Addr: addr, Seeds: []string{addr}, close: b.Close, SQSAddr: b.SQSAddr()}
	t.Cleanup(func() { tb.shutdown(t) })
	return tb
}

// shutdown closes an in-process broker (once; the test's cleanup calls it
// too) and fails the test if Close errors or hangs.
func (b *testBroker) shutdown(t *testing.T) {
	t.Helper()
	b.closeOnce.Do(func() {
		if b.close == nil {
			return
		}
		done := make(chan error, 1)
		go func() { done <- b.close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("broker Close: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("broker Close did not return within 30s (shutdown hang)")
		}
	})
}

// requireInProcess skips tests that only make sense against our own broker
// (they check a Shoal-specific default or limit).
func (b *testBroker) requireInProcess(t *testing.T) {
	t.Helper()
	if b.External {
		t.Skipf("checks Shoal-specific behaviour; %s is set", seedsEnv)
	}
}

// testContext is the context a test's requests run under.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// client returns a kgo client for b, closed when the test ends.
func (b *testBroker) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(b.Seeds...),
		kgo.ClientID("shoal-integration"),
		kgo.RetryTimeout(20 * time.Second),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
	if os.Getenv("SHOAL_TEST_KGO_LOG") != "" {
		base = append(base, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	require.NoError(t, err, "kgo.NewClient")
	t.Cleanup(cl.Close)
	return cl
}

// admin returns a kadm client for b, closed when the test ends.
func (b *testBroker) admin(t *testing.T) *kadm.Client {
	t.Helper()
	return kadm.NewClient(b.client(t))
}

// topicName returns a topic name unique to this test and call.
func topicName(t *testing.T) string {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		default:
			return '.'
		}
	}, t.Name())
	if len(name) > 180 {
		name = name[:180]
	}
	return name + "-" + hex.EncodeToString(suffix[:])
}

// createTopic creates a uniquely named topic and returns its name.
func (b *testBroker) createTopic(t *testing.T, partitions int32, configs map[string]*string) string {
	t.Helper()
	name := topicName(t)
	resp, err := b.admin(t).CreateTopic(testContext(t), partitions, 1, configs, name)
	require.NoError(t, err, "CreateTopic %s", name)
	require.NoError(t, resp.Err, "CreateTopic %s: %s", name, resp.ErrMessage)
	return name
}

// consumeN reads records from the start of every partition of topic until it
// has n of them, and fails the test if they do not arrive in time. It
// returns them in arrival order (offset order within each partition).
func (b *testBroker) consumeN(t *testing.T, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(testContext(t), 30*time.Second)
	defer cancel()
	cl := b.client(t, append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	defer cl.Close()
	var out []*kgo.Record
	errs := 0
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records from %s before timeout", len(out), n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) {
			// kgo retries what is retriable itself; what reaches us is
			// worth failing on, after a couple of chances.
			errs++
			t.Logf("fetch %s/%d: %v", topic, p, err)
			if errs >= 3 {
				t.Fatalf("fetching %s: %d errors, last: %v", topic, errs, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// requireTool returns the path of an external tool. A missing tool fails the
// test when CI is set and skips it otherwise.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		missingTool(t, fmt.Sprintf("%s not found on PATH (apt-get install -y %s)", name, name))
	}
	return path
}

func missingTool(t *testing.T, msg string) {
	t.Helper()
	if _, ci := os.LookupEnv("CI"); ci {
		t.Fatalf("%s; CI is set, so this fails instead of skipping", msg)
	}
	t.Skipf("%s; skipping (would fail with CI set)", msg)
}

// lockedBuffer is a goroutine-safe log sink.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func strp(s string) *string { return &s }

// testLogLevel is the in-process broker's log level: SHOAL_TEST_LOG_LEVEL
// (debug, info, warn, error), default info. The log is shown only when a
// test fails.
func testLogLevel() zapcore.Level {
	lvl := zapcore.InfoLevel
	if s := os.Getenv("SHOAL_TEST_LOG_LEVEL"); s != "" {
		_ = lvl.Set(s)
	}
	return lvl
}

// noRebalanceDelay sets group.initial.rebalance.delay.ms=0 on our broker:
// the first join of an empty classic group otherwise waits 3 s for more
// members.
func noRebalanceDelay(ctx context.Context, t *testing.T, adm *kadm.Client) {
	t.Helper()
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "group.initial.rebalance.delay.ms", Value: strp("0")}})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err, r.ErrMessage)
	}
}

// envScale is the positive integer in environment variable name, 1 if
// it is unset: a test's volume multiplier for a soak run.
func envScale(t *testing.T, name string) int {
	s := os.Getenv(name)
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	require.Positive(t, n, name)
	return n
}
