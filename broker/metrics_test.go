package broker

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func withHTTP(c *Config) { c.HTTPAddr = "127.0.0.1:0" }

// scrape is one /metrics scrape, parsed.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t *testing.T, b *Broker) scrape {
	t.Helper()
	resp, err := http.Get("http://" + b.HTTPAddr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// value sums the samples of a counter, gauge or histogram (its count)
// whose labels include every name=value pair given.
func (s scrape) value(name string, labels ...string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	var sum float64
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// bucket returns the cumulative count of a label-less histogram at le.
func (s scrape) bucket(name string, le float64) uint64 {
	f := s[name]
	if f == nil || len(f.GetMetric()) == 0 {
		return 0
	}
	for _, bk := range f.GetMetric()[0].GetHistogram().GetBucket() {
		if bk.GetUpperBound() == le {
			return bk.GetCumulativeCount()
		}
	}
	return 0
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestMetricsProduceConsume scrapes /metrics around a produce, a consume,
// a group commit and raw requests through real clients, and checks that
// each counter moved by exactly what was done.
func TestMetricsProduceConsume(t *testing.T) {
	t.Parallel()
	b := startTest(t, withHTTP)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s0 := scrapeMetrics(t, b)
	require.Equal(t, 1.0, s0.value("shoal_ready"))
	// Scrape all along, so the race detector sees the collector next to
	// the hot paths.
	stop := make(chan struct{})
	scraped := make(chan int)
	go func() {
		n := 0
		defer func() { scraped <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := http.Get("http://" + b.HTTPAddr() + "/metrics")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				n++
			}
		}
	}()

	const n = 200
	produceValues(t, b, "m", n)
	s1 := scrapeMetrics(t, b)
	require.Equal(t, float64(n), s1.value("shoal_topic_records_in_total", "topic", "m"))
	// Every appended byte is in the segment file: bytes in = log size.
	bytesIn := s1.value("shoal_topic_bytes_in_total", "topic", "m")
	require.Positive(t, bytesIn)
	require.Equal(t, bytesIn, s1.value("shoal_partition_size_bytes", "topic", "m", "partition", "0"))
	require.Equal(t, bytesIn, s1.value("shoal_log_segments_bytes"))
	require.Equal(t, float64(n), s1.value("shoal_partition_log_end_offset", "topic", "m", "partition", "0"))
	require.Equal(t, float64(n), s1.value("shoal_partition_high_watermark", "topic", "m", "partition", "0"))
	require.Equal(t, 0.0, s1.value("shoal_partition_log_start_offset", "topic", "m", "partition", "0"))
	produces := s1.value("shoal_requests_total", "api", "Produce")
	require.Positive(t, produces)
	// Every request is also timed: the histogram counts as many.
	require.Equal(t, produces, s1.value("shoal_request_duration_seconds", "api", "Produce"))
	require.Positive(t, s1.value("shoal_fsync_duration_seconds"))
	require.Positive(t, s1.value("shoal_connections_accepted_total"))
	require.Positive(t, s1.value("shoal_badger_bytes", "part", "vlog")+s1.value("shoal_badger_bytes", "part", "lsm"))

	// Consume everything once: bytes out = bytes in.
	cl := newClient(t, b, kgo.ConsumeTopics("m"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		got += fs.NumRecords()
	}
	require.Equal(t, n, got)
	close(stop)
	require.Positive(t, <-scraped)
	s2 := scrapeMetrics(t, b)
	require.Equal(t, bytesIn, s2.value("shoal_topic_bytes_out_total", "topic", "m"))
	require.Positive(t, s2.value("shoal_requests_total", "api", "Fetch"))

	// A long poll that cannot reach MinBytes reads the partition several
	// times; what it returns is counted once.
	fr := kmsg.NewPtrFetchRequest()
	fr.MaxWaitMillis, fr.MinBytes, fr.MaxBytes = 200, 100<<20, 100<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "m", b.topics.Get("m").ID // v13+ names topics by id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 100 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	fresp, err := fr.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, bytesIn, float64(len(fresp.Topics[0].Partitions[0].RecordBatches)))
	require.Equal(t, 2*bytesIn, scrapeMetrics(t, b).value("shoal_topic_bytes_out_total", "topic", "m"))
	s2 = scrapeMetrics(t, b)

	// Three DescribeCluster requests: nothing else sends them.
	before := s2.value("shoal_requests_total", "api", "DescribeCluster")
	for range 3 {
		_, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		require.NoError(t, err)
	}
	s3 := scrapeMetrics(t, b)
	require.Equal(t, before+3, s3.value("shoal_requests_total", "api", "DescribeCluster"))
	require.Equal(t, before+3, s3.value("shoal_request_duration_seconds", "api", "DescribeCluster"))

	// A committed offset 150 of 200: lag 50.
	adm := kadm.NewClient(cl)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "m", Partition: 0, At: 150, LeaderEpoch: -1})
	r, err := adm.CommitOffsets(ctx, "lagging", os)
	require.NoError(t, err)
	require.NoError(t, r.Error())
	s4 := scrapeMetrics(t, b)
	require.Equal(t, 50.0, s4.value("shoal_consumer_group_lag", "group", "lagging", "topic", "m", "partition", "0"))

	// The deleted topic's series go away.
	_, err = adm.DeleteTopic(ctx, "m")
	require.NoError(t, err)
	s5 := scrapeMetrics(t, b)
	require.Zero(t, s5.value("shoal_topic_bytes_in_total", "topic", "m"))
	require.Zero(t, s5.value("shoal_partition_log_end_offset", "topic", "m"))
}

// TestMetricsShareGroup drives a share-partition through lock expiry,
// rejects and accepts with raw ShareFetch/ShareAcknowledge requests (so
// each step is exact), then a franz-go share consumer, and checks the
// share-group metrics after each step.
func TestMetricsShareGroup(t *testing.T) {
	t.Parallel()
	b := startShareTest(t, withHTTP)
	const n = 20
	produceValues(t, b, "ms", n)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "1000")
	recs := func(s scrape, group, state string) float64 {
		return s.value("shoal_share_partition_records", "group", group, "topic", "ms", "partition", "0", "state", state)
	}
	a := newRawShare(t, b, "g", "a", "ms")
	require.Equal(t, [][3]int64{{0, n - 1, 1}}, acquired(onlyPartition(t, a.fetch(0, 1000, 100))))
	s1 := scrapeMetrics(t, b)
	require.Equal(t, float64(n), recs(s1, "g", "acquired"))
	require.Equal(t, float64(n), s1.value("shoal_topic_records_out_total", "topic", "ms"))
	require.Equal(t, uint64(n), s1.bucket("shoal_share_delivery_count", 1))

	// Not acknowledged: every lock expires.
	require.Eventually(t, func() bool {
		return scrapeMetrics(t, b).value("shoal_share_acquisition_lock_expiries_total", "group", "g") == n
	}, 10*time.Second, 50*time.Millisecond)
	s2 := scrapeMetrics(t, b)
	require.Equal(t, float64(n), recs(s2, "g", "available"))
	require.Zero(t, recs(s2, "g", "acquired"))
	require.Equal(t, float64(n), s2.value("shoal_share_partition_lag", "group", "g", "topic", "ms"))

	// Second delivery: reject offsets 0-4, accept the rest.
	require.Equal(t, [][3]int64{{0, n - 1, 2}}, acquired(onlyPartition(t, a.fetch(1, 1000, 100))))
	require.Zero(t, ackCode(t, a.ack(2, false, ackBatch(0, 4, 3), ackBatch(5, n-1, 1))))
	s3 := scrapeMetrics(t, b)
	require.Equal(t, 5.0, s3.value("shoal_share_archived_records_total", "group", "g"))
	require.Equal(t, float64(n), s3.value("shoal_share_acquisition_lock_expiries_total", "group", "g"))
	require.Equal(t, float64(2*n), s3.value("shoal_topic_records_out_total", "topic", "ms"))
	require.Equal(t, uint64(n), s3.bucket("shoal_share_delivery_count", 1))
	require.Equal(t, uint64(2*n), s3.bucket("shoal_share_delivery_count", 2))
	require.Equal(t, float64(2*n), s3.value("shoal_share_delivery_count"))
	require.Zero(t, s3.value("shoal_share_partition_lag", "group", "g", "topic", "ms"))
	require.Zero(t, recs(s3, "g", "acquired")+recs(s3, "g", "available"))
	require.Equal(t, 2.0, s3.value("shoal_requests_total", "api", "ShareFetch"))
	require.Equal(t, 1.0, s3.value("shoal_requests_total", "api", "ShareAcknowledge"))

	// A franz-go share consumer of another group accepts everything.
	setShareGroupConfigs(t, b, "g2", "share.auto.offset.reset", "earliest")
	cl := newShareClient(t, b, "g2", kgo.ConsumeTopics("ms"))
	seen := map[int64]bool{}
	for deadline := time.Now().Add(20 * time.Second); len(seen) < n && time.Now().Before(deadline); {
		for _, r := range pollShare(t, cl, 5*time.Second) {
			seen[r.Offset] = true
			r.Ack(kgo.AckAccept)
		}
	}
	require.Len(t, seen, n)
	flushAcks(t, cl)
	s4 := scrapeMetrics(t, b)
	require.Equal(t, float64(3*n), s4.value("shoal_topic_records_out_total", "topic", "ms"))
	require.Equal(t, uint64(2*n), s4.bucket("shoal_share_delivery_count", 1))
	require.Zero(t, s4.value("shoal_share_partition_lag", "group", "g2", "topic", "ms"))
	require.Zero(t, s4.value("shoal_share_archived_records_total", "group", "g2"))
	require.Positive(t, s4.value("shoal_requests_total", "api", "ShareGroupHeartbeat"))
}

// TestReadyOnlyAfterRecovery holds Start before recovery: the HTTP server
// already answers, /healthz is ok, /readyz is 503 and shoal_ready 0; once
// recovery finishes /readyz is 200; once Close begins it is gone.
func TestReadyOnlyAfterRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A first run leaves a topic to recover.
	b0 := startTest(t, func(c *Config) { c.DataDir = dir })
	produceValues(t, b0, "r", 10)
	require.NoError(t, b0.Close())

	addr := make(chan string, 1)
	release := make(chan struct{})
	started := make(chan *Broker, 1)
	go func() {
		b, err := Start(Config{ListenAddr: "127.0.0.1:0", DataDir: dir, HTTPAddr: "127.0.0.1:0", Fsync: FsyncAlways,
			DefaultPartitions: 1, IdleTimeout: time.Minute, MaxRequestBytes: 1 << 20, RetentionCheckInterval: time.Minute,
			ShutdownTimeout: time.Second,
			beforeRecovery:  func(b *Broker) { addr <- b.HTTPAddr(); <-release }})
		if err != nil {
			t.Error(err)
		}
		started <- b
	}()
	base := "http://" + <-addr
	code, body := httpGet(t, base+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "recovering")
	code, _ = httpGet(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	code, body = httpGet(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "shoal_ready 0")
	require.NotContains(t, body, "shoal_partition_log_end_offset")

	close(release)
	b := <-started
	require.NotNil(t, b)
	code, body = httpGet(t, base+"/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "ready")
	code, body = httpGet(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "shoal_ready 1")
	require.Contains(t, body, `shoal_partition_log_end_offset{partition="0",topic="r"} 10`)
	code, _ = httpGet(t, base+"/debug/pprof/")
	require.Equal(t, http.StatusNotFound, code, "pprof is off by default")

	require.NoError(t, b.Close())
	_, err := http.Get(base + "/healthz")
	require.Error(t, err, "the HTTP server stops with the broker")
}

func TestPprofBehindFlag(t *testing.T) {
	t.Parallel()
	b := startTest(t, withHTTP, func(c *Config) { c.Pprof = true })
	code, body := httpGet(t, "http://"+b.HTTPAddr()+"/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	require.True(t, strings.Contains(body, "goroutine"))
}
