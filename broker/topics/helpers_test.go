package topics

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/broker/metrics"
	slog "github.com/shoal-mq/shoal/log"
)

// testLogConfig is the broker defaults (log.DefaultConfig) with the few
// topic overrides the tests use mapped onto the log config, so a test
// can see an override reach the partition logs.
func testLogConfig(over map[string]string) slog.Config {
	c := slog.DefaultConfig()
	if v, ok := over["retention.ms"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			panic(err)
		}
		c.RetentionMs = n
	}
	if v, ok := over["max.message.bytes"]; ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			panic(err)
		}
		c.MaxMessageBytes = int32(n)
	}
	return c
}

// hooks records the calls a deletion makes to the packages above
// (Options.Forget, DropOffsets, DropShareState) and injects their
// failures and BeforeCleanup's. Safe for concurrent use.
type hooks struct {
	mu             sync.Mutex
	calls          []string
	cleanupErr     error
	dropOffsetsErr error
	dropShareErr   error
}

func idHex(id [16]byte) string { return hex.EncodeToString(id[:]) }

func (h *hooks) record(s string) {
	h.mu.Lock()
	h.calls = append(h.calls, s)
	h.mu.Unlock()
}

// take returns the calls recorded since the last take.
func (h *hooks) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.calls
	h.calls = nil
	return c
}

func (h *hooks) setCleanupErr(err error) {
	h.mu.Lock()
	h.cleanupErr = err
	h.mu.Unlock()
}

func (h *hooks) setDropOffsetsErr(err error) {
	h.mu.Lock()
	h.dropOffsetsErr = err
	h.mu.Unlock()
}

func (h *hooks) forget(id [16]byte) { h.record("forget " + idHex(id)) }

func (h *hooks) dropOffsets(topic string) error {
	h.record("dropOffsets " + topic)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropOffsetsErr
}

func (h *hooks) dropShareState(id [16]byte) error {
	h.record("dropShareState " + idHex(id))
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropShareErr
}

func (h *hooks) beforeCleanup(topic string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cleanupErr
}

// env is one broker's topics over a real metadata store and log
// directory; restart closes it and opens a new Registry and Admin over
// the same directory, as a broker restart does.
type env struct {
	t     *testing.T
	dir   string
	fs    slog.FS
	hooks *hooks
	// logger is given to the Admin (the store gets a no-op one).
	logger *zap.Logger

	store *meta.Store
	reg   *Registry
	admin *Admin
}

// newEnv opens an env on the OS file system and loads it.
func newEnv(t *testing.T) *env {
	return newEnvFS(t, slog.OSFS())
}

func newEnvFS(t *testing.T, fs slog.FS) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), fs: fs, hooks: &hooks{}, logger: zap.NewNop()}
	t.Cleanup(e.close)
	e.open()
	return e
}

// open opens the store, a new Registry and Admin, and loads them.
func (e *env) open() {
	e.t.Helper()
	require.Nil(e.t, e.store, "open twice")
	st, err := meta.Open(e.dir, zap.NewNop())
	require.NoError(e.t, err)
	e.store = st
	e.reg = NewRegistry()
	e.admin = NewAdmin(Options{
		Registry:       e.reg,
		Store:          st,
		DataDir:        e.dir,
		FS:             e.fs,
		LogConfig:      testLogConfig,
		Metrics:        metrics.New(nil),
		Logger:         e.logger,
		Forget:         e.hooks.forget,
		DropOffsets:    e.hooks.dropOffsets,
		DropShareState: e.hooks.dropShareState,
		BeforeCleanup:  e.hooks.beforeCleanup,
	})
	require.NoError(e.t, e.admin.Load())
}

// close closes every partition log and the store (idempotent).
func (e *env) close() {
	e.t.Helper()
	if e.store == nil {
		return
	}
	require.NoError(e.t, e.reg.Close())
	require.NoError(e.t, e.store.Close())
	e.store, e.reg, e.admin = nil, nil, nil
}

func (e *env) restart() {
	e.t.Helper()
	e.close()
	e.open()
}

func (e *env) create(name string, partitions int32, configs map[string]string) *Topic {
	e.t.Helper()
	tp, err := e.admin.Create(name, partitions, configs, false)
	require.NoError(e.t, err)
	require.NotNil(e.t, tp)
	return tp
}

func (e *env) logsDir() string { return filepath.Join(e.dir, "logs") }

func (e *env) partDir(topic string, idx int) string {
	return filepath.Join(e.logsDir(), topic+"-"+strconv.Itoa(idx))
}

// storedTopics reads the topic records from the store, by name.
func (e *env) storedTopics() map[string]record {
	e.t.Helper()
	recs, err := e.admin.store.topics()
	require.NoError(e.t, err)
	out := map[string]record{}
	for _, r := range recs {
		out[r.Name] = r
	}
	return out
}

func (e *env) pending() []string {
	e.t.Helper()
	names, err := e.admin.PendingDeletions()
	require.NoError(e.t, err)
	return names
}

func requireDirExists(t *testing.T, dir string) {
	t.Helper()
	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.True(t, st.IsDir(), dir)
}

func requireNoDir(t *testing.T, dir string) {
	t.Helper()
	_, err := os.Stat(dir)
	require.True(t, os.IsNotExist(err), "%s: %v", dir, err)
}

// appendOne appends one record batch (a transaction marker: the log's
// own encoder, so no batch needs building here) and moves the high
// watermark over it; it returns the new log end offset.
func appendOne(t *testing.T, p *Partition, now time.Time) int64 {
	t.Helper()
	_, err := p.Log.WriteMarker(slog.Marker{ProducerID: 1, ProducerEpoch: 0, Commit: true}, now)
	require.NoError(t, err)
	leo := p.Log.LogEndOffset()
	p.Log.SetHighWatermark(leo)
	return leo
}
