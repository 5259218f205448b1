//go:build linux

package integration

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Crash test parameters. The whole test is sized to finish in well under
// three minutes on two cores with 25 kills.
const (
	crashPartitions   = 3
	crashProducers    = 4
	crashRatePerProd  = 400 // records per second per producer
	crashInflight     = 256 // unacknowledged records per producer
	crashValueSize    = 200 // bytes; with 1 MiB segments a partition rolls every few seconds
	crashRestartBound = 10 * time.Second
)

func crashCycles(t *testing.T) int {
	if s := os.Getenv("SHOAL_CRASH_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "SHOAL_CRASH_CYCLES")
		return n
	}
	if _, ci := os.LookupEnv("CI"); ci {
		return 25
	}
	return 5
}

func crashSeed(t *testing.T) uint64 {
	if s := os.Getenv("SHOAL_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "SHOAL_CRASH_SEED")
		return n
	}
	return uint64(time.Now().UnixNano())
}

// TestCrashRecovery SIGKILLs a child broker (fsync=always) at random moments
// while idempotent acks=all producers write unique values, and after every
// restart reads all partitions back and checks: every acknowledged record is
// at the offset it was acknowledged at; offsets start at 0 and have no gaps;
// no value appears twice; a value whose produce is not (yet) acknowledged
// appears at most once and only above the highest offset acknowledged in its
// partition before it was sent; each producer's values appear in order;
// records read after an earlier restart are unchanged; the high watermark
// never goes back; the broker answers ApiVersions within crashRestartBound.
//
// Not parallel on purpose: it runs alone before the parallel tests, so its
// kill timing is not at the mercy of other brokers competing for two cores.
func TestCrashRecovery(t *testing.T) {
	if len(externalSeeds()) > 0 {
		t.Skipf("runs its own shoal binary; %s is set", seedsEnv)
	}
	if testing.Short() {
		t.Skip("-short")
	}
	cycles := crashCycles(t)
	seed := crashSeed(t)
	t.Logf("crash test: %d kills, SHOAL_CRASH_SEED=%d", cycles, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5ea1))

	child := newCrashChild(t, seed)
	child.start()
	child.waitReady()

	topic := "crash-" + strconv.FormatUint(seed%1e9, 10)
	adm := kadm.NewClient(newCrashClient(t, child.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	resp, err := adm.CreateTopic(ctx, crashPartitions, 1, map[string]*string{"segment.bytes": strp("1048576")}, topic)
	cancel()
	adm.Close()
	require.NoError(t, err)
	require.NoError(t, resp.Err, resp.ErrMessage)

	h := newCrashHistory(topic, seed)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for id := range crashProducers {
		cl := newCrashClient(t, child.addr,
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(2*time.Millisecond),
			kgo.MaxBufferedRecords(2*crashInflight),
		)
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.produce(cl, id, stop)
		}()
	}

	var maxRestart time.Duration
	for cycle := 1; cycle <= cycles; cycle++ {
		var alive time.Duration
		if rng.IntN(10) < 3 {
			alive = time.Duration(rng.IntN(200)) * time.Millisecond
		} else {
			alive = 200*time.Millisecond + time.Duration(rng.IntN(1300))*time.Millisecond
		}
		time.Sleep(alive)
		child.kill()
		if rng.IntN(5) == 0 {
			// Crash again during recovery.
			child.start()
			time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
			child.kill()
		}
		child.start()
		took := child.waitReady()
		maxRestart = max(maxRestart, took)
		vstart := time.Now()
		st := h.verify(t, child.addr, false)
		t.Logf("cycle %2d: alive %4dms, ready after %4dms, verified %6d records in %4dms (acked %d, not acked %d, pending %d)",
			cycle, alive.Milliseconds(), took.Milliseconds(), st.read, time.Since(vstart).Milliseconds(), st.acked, st.failed, st.pending)
	}

	// Stop producing, let everything in flight settle, then a graceful
	// shutdown (which must not hang) and one more full check.
	close(stop)
	wg.Wait()
	for _, cl := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := cl.Flush(ctx); err != nil {
			t.Logf("flush: %v", err)
		}
		cancel()
		cl.Close()
	}
	child.terminate()
	child.start()
	child.waitReady()
	st := h.verify(t, child.addr, true)
	t.Logf("final: %d records read; %d acknowledged (all present), %d not acknowledged of which %d present; slowest restart %v",
		st.read, st.acked, st.failed, st.failedPresent, maxRestart)
	require.Positive(t, st.acked, "no record was acknowledged: the test checked nothing")
	require.Greater(t, st.acked, cycles*20, "too little progress across restarts")
	if len(st.failReasons) > 0 {
		t.Logf("not-acknowledged reasons: %v", st.failReasons)
	}
	child.terminate()
}

// ---- child process ----

type childBroker struct {
	t       *testing.T
	bin     string
	addr    string
	dataDir string
	logPath string
	args    []string // more command-line arguments

	cmd    *exec.Cmd
	done   chan error
	starts int
}

func buildShoal(t *testing.T, dir string) string {
	t.Helper()
	goBin := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			goBin = p
		}
	}
	out := filepath.Join(dir, "shoal")
	start := time.Now()
	cmd := exec.Command(goBin, "build", "-o", out, "github.com/shoal-mq/shoal/cmd/shoal")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/shoal:\n%s", b)
	t.Logf("built cmd/shoal in %v", time.Since(start).Round(time.Millisecond))
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// handedOut are the addresses freeAddr gave in this process: a port
// closed again may be handed out twice by the kernel (seen in CI, two
// brokers of one cluster given one port), so it is never given twice.
var handedOut = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

// freeAddr returns a 127.0.0.1 address free now and not given before.
func freeAddr(t *testing.T) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		if !handedOut.m[addr] {
			handedOut.m[addr] = true
			return addr
		}
	}
}

func (c *childBroker) start() {
	c.t.Helper()
	require.Nil(c.t, c.cmd, "start: broker already running")
	c.starts++
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(c.t, err)
	fmt.Fprintf(logf, "=== test: start #%d at %s\n", c.starts, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin,
		"--listen", c.addr,
		"--data-dir", c.dataDir,
		"--fsync", "always",
		"--log-level", "info",
		"--http-addr", "", // several children (and other test runs) must not fight over 127.0.0.1:9644
		"--sqs-addr", "", // nor over 127.0.0.1:9324
	)
	cmd.Args = append(cmd.Args, c.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test
	require.NoError(c.t, cmd.Start(), "start shoal")
	_ = logf.Close() // the child has its own descriptor
	c.cmd = cmd
	c.done = make(chan error, 1)
	go func() { c.done <- cmd.Wait() }()
}

// waitReady waits until the broker answers ApiVersions and returns how long
// that took; it fails the test past crashRestartBound. If the process exits
// during startup that is a failure too, but the test records it and starts
// the broker again (up to twice) so the data checks still run and report.
func (c *childBroker) waitReady() time.Duration {
	c.t.Helper()
	start := time.Now()
	for exits := 0; ; {
		select {
		case err := <-c.done:
			c.cmd = nil
			exits++
			c.t.Errorf("shoal exited during startup (start #%d): %v; log:\n%s", c.starts, err, c.logSinceLastStart())
			if exits > 2 {
				c.t.Fatalf("shoal does not start any more")
			}
			c.start()
		default:
		}
		if apiVersionsOK(c.addr) {
			return time.Since(start)
		}
		if time.Since(start) > crashRestartBound {
			c.t.Fatalf("shoal did not answer ApiVersions within %v of start #%d", crashRestartBound, c.starts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logSinceLastStart returns the child's output since the last start marker.
func (c *childBroker) logSinceLastStart() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return err.Error()
	}
	s := string(b)
	if i := strings.LastIndex(s, "=== test: start #"); i >= 0 {
		s = s[i:]
	}
	return tailLines(s, 30)
}

// keepDataDir moves the data directory (and the log) out of the test's
// temporary directory so a failure can be examined.
func (c *childBroker) keepDataDir(seed uint64) {
	kept := filepath.Join(os.TempDir(), fmt.Sprintf("shoal-crash-%d", seed))
	_ = os.RemoveAll(kept)
	if err := os.Rename(filepath.Dir(c.dataDir), kept); err != nil {
		c.t.Logf("could not keep the data directory: %v", err)
		return
	}
	c.t.Logf("kept the data directory and shoal.log in %s", kept)
}

func apiVersionsOK(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "shoal-crash-test", "1"
	if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		return false
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return false
	}
	n := int(size[0])<<24 | int(size[1])<<16 | int(size[2])<<8 | int(size[3])
	if n < 6 || n > 1<<20 {
		return false
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return false
	}
	resp := kmsg.ApiVersionsResponse{Version: 3}
	return resp.ReadFrom(body[4:]) == nil && resp.ErrorCode == 0
}

func (c *childBroker) kill() {
	c.t.Helper()
	require.NotNil(c.t, c.cmd, "kill: broker not running")
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case err := <-c.done:
		// It should have died of the signal, not exited on its own first.
		if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && !ws.Signaled() {
			c.t.Errorf("shoal exited by itself before SIGKILL (start #%d): %v; log:\n%s", c.starts, err, c.logSinceLastStart())
		}
	case <-time.After(10 * time.Second):
		c.t.Fatalf("shoal did not die within 10s of SIGKILL")
	}
	c.cmd = nil
}

// terminate sends SIGTERM and requires a clean exit: a shutdown hang or a
// non-zero status fails the test.
func (c *childBroker) terminate() {
	c.t.Helper()
	require.NotNil(c.t, c.cmd, "terminate: broker not running")
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		c.cmd = nil
		require.NoError(c.t, err, "shoal exit status after SIGTERM")
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.done
		c.cmd = nil
		c.t.Fatalf("shoal did not exit within 20s of SIGTERM (shutdown hang)")
	}
}

func (c *childBroker) stopQuietly() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
	c.cmd = nil
}

func (c *childBroker) dumpLog(lines int) {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		c.t.Logf("no shoal log: %v", err)
		return
	}
	c.t.Logf("shoal log (last %d lines):\n%s", lines, tailLines(string(b), lines))
}

func newCrashClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID("shoal-crash-test"),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.DialTimeout(time.Second),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	require.NoError(t, err)
	return cl
}

// ---- history and checker ----

type recID struct{ producer, seq int }

func (r recID) String() string { return fmt.Sprintf("p%d-%d", r.producer, r.seq) }

func parseRecID(v []byte) (recID, bool) {
	s := string(v)
	if i := strings.IndexByte(s, ' '); i >= 0 {
		s = s[:i]
	}
	var id recID
	if _, err := fmt.Sscanf(s, "p%d-%d", &id.producer, &id.seq); err != nil || s != id.String() {
		return recID{}, false
	}
	return id, true
}

const (
	statePending = iota
	stateAcked
	stateFailed
)

type crashEntry struct {
	partition int32
	floor     int64 // highest offset acknowledged in the partition when sent
	state     int
	offset    int64
	err       error
}

// crashHistory is the producers' history and what earlier checks read.
// mu guards everything; producers and the checker share it.
type crashHistory struct {
	topic string
	seed  uint64

	mu       sync.Mutex
	entries  map[recID]*crashEntry
	maxAcked [crashPartitions]int64
	read     [crashPartitions][]recID // values at offsets 0.. as last read
	lastHWM  [crashPartitions]int64
}

func newCrashHistory(topic string, seed uint64) *crashHistory {
	h := &crashHistory{topic: topic, seed: seed, entries: map[recID]*crashEntry{}}
	for p := range h.maxAcked {
		h.maxAcked[p] = -1
	}
	return h
}

func (h *crashHistory) produce(cl *kgo.Client, producer int, stop <-chan struct{}) {
	sem := make(chan struct{}, crashInflight)
	tick := time.NewTicker(time.Second / crashRatePerProd)
	defer tick.Stop()
	pad := strings.Repeat("x", crashValueSize)
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		select {
		case <-stop:
			return
		case sem <- struct{}{}:
		}
		id := recID{producer, seq}
		p := int32(seq % crashPartitions)
		v := id.String() + " "
		v += pad[:crashValueSize-len(v)]
		h.mu.Lock()
		h.entries[id] = &crashEntry{partition: p, floor: h.maxAcked[p], offset: -1}
		h.mu.Unlock()
		cl.Produce(context.Background(), &kgo.Record{Topic: h.topic, Partition: p, Key: []byte(id.String()), Value: []byte(v)},
			func(r *kgo.Record, err error) {
				h.mu.Lock()
				e := h.entries[id]
				if err != nil {
					// Indeterminate: a kill, a timeout or a client-side
					// failure may or may not have left the record in the log.
					e.state, e.err = stateFailed, err
				} else {
					e.state, e.offset = stateAcked, r.Offset
					h.maxAcked[p] = max(h.maxAcked[p], r.Offset)
				}
				h.mu.Unlock()
				<-sem
			})
	}
}

type crashStats struct {
	read, acked, failed, failedPresent, pending int
	failReasons                                 map[string]int
}

// verify reads every partition up to its high watermark and checks it
// against the history. With final set, nothing may be pending.
func (h *crashHistory) verify(t *testing.T, addr string, final bool) crashStats {
	t.Helper()
	var violations []string
	bad := func(format string, args ...any) {
		if len(violations) < 30 {
			violations = append(violations, fmt.Sprintf(format, args...))
		}
	}

	// Snapshot what is acknowledged now; everything in it must be readable.
	type ackedAt struct {
		id     recID
		offset int64
	}
	var snapshot [crashPartitions][]ackedAt
	h.mu.Lock()
	for id, e := range h.entries {
		if e.state == stateAcked {
			snapshot[e.partition] = append(snapshot[e.partition], ackedAt{id, e.offset})
		}
	}
	h.mu.Unlock()

	cl := newCrashClient(t, addr)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ends kadm.ListedOffsets
	var err error
	for range 50 { // right after a restart the client may still be reconnecting
		if ends, err = adm.ListEndOffsets(ctx, h.topic); err == nil && ends.Error() == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err, "ListEndOffsets")
	require.NoError(t, ends.Error(), "ListEndOffsets")
	var hwm [crashPartitions]int64
	for p := range int32(crashPartitions) {
		o, ok := ends.Lookup(h.topic, p)
		require.True(t, ok, "no end offset for partition %d", p)
		hwm[p] = o.Offset
	}

	// Read everything below the high watermarks.
	got := [crashPartitions][]recID{}
	offsets := map[string]map[int32]kgo.Offset{h.topic: {}}
	for p := range int32(crashPartitions) {
		if hwm[p] > 0 {
			offsets[h.topic][p] = kgo.NewOffset().At(0)
		}
	}
	if len(offsets[h.topic]) > 0 {
		reader := newCrashClient(t, addr, kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(100*time.Millisecond))
		defer reader.Close()
		done := func() bool {
			for p := range crashPartitions {
				if int64(len(got[p])) < hwm[p] {
					return false
				}
			}
			return true
		}
		for !done() {
			fs := reader.PollFetches(ctx)
			if ctx.Err() != nil {
				for p := range crashPartitions {
					if int64(len(got[p])) < hwm[p] {
						bad("partition %d: read %d records, high watermark %d: the rest never arrived", p, len(got[p]), hwm[p])
					}
				}
				break
			}
			fs.EachError(func(_ string, p int32, err error) { bad("fetch partition %d: %v", p, err) })
			if len(violations) > 0 {
				break
			}
			fs.EachRecord(func(r *kgo.Record) {
				p := r.Partition
				if r.Offset != int64(len(got[p])) {
					bad("partition %d: offset %d follows %d (gap or reorder)", p, r.Offset, len(got[p])-1)
					return
				}
				id, ok := parseRecID(r.Value)
				if !ok {
					bad("partition %d offset %d: value %.40q was never written", p, r.Offset, r.Value)
				}
				got[p] = append(got[p], id)
			})
			if len(violations) > 0 {
				break
			}
		}
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	st := crashStats{failReasons: map[string]int{}}
	seen := map[recID]string{}
	for p := range crashPartitions {
		st.read += len(got[p])
		if hwm[p] < h.lastHWM[p] {
			bad("partition %d: high watermark went back from %d to %d", p, h.lastHWM[p], hwm[p])
		}
		h.lastHWM[p] = max(h.lastHWM[p], hwm[p])
		for i, prev := range h.read[p] {
			if i < len(got[p]) && got[p][i] != prev {
				bad("partition %d offset %d: was %v in an earlier read, now %v", p, i, prev, got[p][i])
			}
		}
		lastSeq := map[int]int{}
		for off, id := range got[p] {
			where := fmt.Sprintf("%d/%d", p, off)
			if prev, dup := seen[id]; dup {
				bad("%v appears twice: at %s and %s", id, prev, where)
			}
			seen[id] = where
			e, ok := h.entries[id]
			if !ok {
				bad("%v at %s was never sent", id, where)
				continue
			}
			if e.partition != int32(p) {
				bad("%v sent to partition %d found at %s", id, e.partition, where)
			}
			switch e.state {
			case stateAcked:
				if e.offset != int64(off) {
					bad("%v acknowledged at offset %d found at %s", id, e.offset, where)
				}
			default:
				if int64(off) <= e.floor {
					bad("unacknowledged %v found at %s, at or below offset %d acknowledged before it was sent", id, where, e.floor)
				}
			}
			if last, ok := lastSeq[id.producer]; ok && id.seq <= last {
				bad("producer %d: seq %d at %s after seq %d (reordered)", id.producer, id.seq, where, last)
			}
			lastSeq[id.producer] = id.seq
		}
		if len(got[p]) > len(h.read[p]) {
			h.read[p] = got[p]
		}
		for _, a := range snapshot[p] {
			switch {
			case a.offset >= hwm[p]:
				bad("%v acknowledged at %d/%d is above the high watermark %d after restart (lost)", a.id, p, a.offset, hwm[p])
			case a.offset < int64(len(got[p])) && got[p][a.offset] != a.id:
				bad("%v acknowledged at %d/%d, but that offset holds %v (lost or overwritten)", a.id, p, a.offset, got[p][a.offset])
			}
		}
	}
	for id, e := range h.entries {
		switch e.state {
		case stateAcked:
			st.acked++
			if final {
				if _, ok := seen[id]; !ok {
					bad("%v acknowledged at %d/%d was not read back", id, e.partition, e.offset)
				}
			}
		case stateFailed:
			st.failed++
			if _, ok := seen[id]; ok {
				st.failedPresent++
			}
			st.failReasons[shortErr(e.err)]++
		default:
			st.pending++
			if final {
				bad("%v still pending after flush", id)
			}
		}
	}
	if len(violations) > 0 {
		sort.Strings(violations)
		t.Fatalf("crash check found %d violation(s) (replay with SHOAL_CRASH_SEED=%d):\n  %s", len(violations), h.seed, strings.Join(violations, "\n  "))
	}
	return st
}

func shortErr(err error) string {
	s := fmt.Sprint(err)
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// newCrashChild builds cmd/shoal and returns a child broker on a free
// port with its own data dir. Cleanup stops it and, if the test failed,
// prints its log and keeps the data dir for SHOAL_CRASH_SEED=seed.
func newCrashChild(t *testing.T, seed uint64) *childBroker {
	t.Helper()
	bin := buildShoal(t, t.TempDir())
	work := filepath.Join(t.TempDir(), "run")
	require.NoError(t, os.Mkdir(work, 0o755))
	child := &childBroker{
		t:       t,
		bin:     bin,
		addr:    freeAddr(t),
		dataDir: filepath.Join(work, "data"),
		logPath: filepath.Join(work, "shoal.log"),
	}
	t.Cleanup(func() {
		child.stopQuietly()
		if t.Failed() {
			child.dumpLog(100)
			child.keepDataDir(seed)
		}
	})
	return child
}
