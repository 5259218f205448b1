package broker

// Prometheus metrics. Every Broker has its own metrics struct and its own
// prometheus.Registry (never the global one: tests start many brokers in
// one process), served on /metrics by the HTTP server (http.go).
//
// Two kinds of metrics:
//
//   - event metrics, updated where the event happens: requests and their
//     latency (conn.go), bytes and records in and out per topic
//     (Produce, Fetch, ShareFetch), connections (broker.go), fsync
//     latency (syncer.go), share-group lock expiries, archived records
//     and delivery counts (share.go). The hot paths never build label
//     strings or look up a label map: the children are resolved once,
//     per (API key, version) when the broker starts and per topic when a
//     partition is opened, and kept next to the code that updates them.
//   - state metrics, read from the broker's state at scrape time by
//     stateCollector: partition offsets and sizes, consumer-group lag,
//     share-group records per state, disk usage. Nothing is updated on
//     append for them.
//
// Names follow Prometheus conventions: the shoal_ prefix, _total for
// counters, base units (_seconds, _bytes).

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/sharegroup"
)

// requestMetrics are the children for one (API key, version).
type requestMetrics struct {
	count   prometheus.Counter
	seconds prometheus.Observer
}

// topicMetrics are the children for one topic, shared by its partitions.
type topicMetrics struct {
	bytesIn, bytesOut, recordsIn, recordsOut prometheus.Counter
}

// shareGroupMetrics are the children for one share group, kept by each
// of its share-partitions.
type shareGroupMetrics struct {
	lockExpiries prometheus.Counter
	archived     prometheus.Counter
}

// maxTrackedDeliveryCount is the largest delivery count with its own
// histogram bucket (Kafka's group.share.max.delivery.count.limit is at
// most 25).
const maxTrackedDeliveryCount = 25

// metrics holds every collector of one broker.
type metrics struct {
	reg *prometheus.Registry

	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	// byAPI[key][version-min] is resolved on the first request of that
	// API and version (so the scrape lists only the pairs in use), then
	// loaded with one atomic read.
	byAPI [kmsg.MaxKey + 1][]atomic.Pointer[requestMetrics]

	bytesIn, bytesOut, recordsIn, recordsOut *prometheus.CounterVec

	connections         prometheus.Gauge
	connectionsAccepted prometheus.Counter

	fsyncSeconds prometheus.Histogram

	lockExpiries *prometheus.CounterVec
	archived     *prometheus.CounterVec
	// deliveryCounts[n] counts records handed out with delivery count n
	// (the last slot: above maxTrackedDeliveryCount); exported as a
	// histogram by stateCollector. Plain atomics because one ShareFetch
	// acquires whole ranges: one Add per range, not one Observe per
	// record.
	deliveryCounts [maxTrackedDeliveryCount + 2]atomic.Uint64

	// DLQRecords (shoal_share_dlq_records_total{group}) counts records
	// written to a share group's dead-letter topic; QuotaThrottle
	// (shoal_quota_throttle_time_seconds{entity_type}) observes the
	// throttle time given to a client by a quota. Declared here so the
	// names are fixed; share_dlq.go and quota.go update them.
	DLQRecords    *prometheus.CounterVec
	QuotaThrottle *prometheus.HistogramVec
}

func newMetrics(b *Broker) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shoal_requests_total",
		Help: "Kafka requests received, by API and version.",
	}, []string{"api", "version"})
	m.requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "shoal_request_duration_seconds",
		Help: "Time from a request being decoded to its response being written (fsync waits included), by API and version.",
		// 100µs to ~6.5s.
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17),
	}, []string{"api", "version"})
	for _, a := range servedAPIs() {
		m.byAPI[a.key] = make([]atomic.Pointer[requestMetrics], a.max-a.min+1)
	}
	topicCounter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"topic"})
	}
	m.bytesIn = topicCounter("shoal_topic_bytes_in_total", "Record batch bytes appended by Produce, by topic (idempotent duplicates excluded).")
	m.bytesOut = topicCounter("shoal_topic_bytes_out_total", "Record batch bytes returned by Fetch and ShareFetch, by topic.")
	m.recordsIn = topicCounter("shoal_topic_records_in_total", "Records appended by Produce, by topic (idempotent duplicates excluded).")
	m.recordsOut = topicCounter("shoal_topic_records_out_total", "Records acquired by ShareFetch, by topic (Fetch returns whole batches and is counted in bytes only).")
	m.connections = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shoal_connections",
		Help: "Open client connections.",
	})
	m.connectionsAccepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shoal_connections_accepted_total",
		Help: "Client connections accepted.",
	})
	m.fsyncSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "shoal_fsync_duration_seconds",
		Help: "Duration of one partition log fsync (segment, indexes and checkpoint as needed).",
		// 50µs to ~1.6s.
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
	})
	m.lockExpiries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shoal_share_acquisition_lock_expiries_total",
		Help: "Records whose acquisition lock expired before they were acknowledged, by share group.",
	}, []string{"group"})
	m.archived = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shoal_share_archived_records_total",
		Help: "Records that became Archived (rejected, or delivery count limit reached), by share group.",
	}, []string{"group"})
	m.DLQRecords = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shoal_share_dlq_records_total",
		Help: "Records written to a share group's dead-letter topic, by share group.",
	}, []string{"group"})
	m.QuotaThrottle = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "shoal_quota_throttle_time_seconds",
		Help:    "Throttle time owed to each throttle-mode quota that made a client wait, by scope (user, client-id, user+client-id, ip, broker, topic, share-group).",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 9), // 1ms to ~65s
	}, []string{"entity_type"})
	m.reg.MustRegister(
		m.requests, m.requestSeconds,
		m.bytesIn, m.bytesOut, m.recordsIn, m.recordsOut,
		m.connections, m.connectionsAccepted,
		m.fsyncSeconds,
		m.lockExpiries, m.archived, m.DLQRecords, m.QuotaThrottle,
		&stateCollector{b: b},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// request returns the children for a served (key, version); the caller
// has checked the version against the API's range.
func (m *metrics) request(a *api, version int16) *requestMetrics {
	slot := &m.byAPI[a.key][version-a.min]
	if rm := slot.Load(); rm != nil {
		return rm
	}
	name, vs := kmsg.NameForKey(a.key), strconv.Itoa(int(version))
	rm := &requestMetrics{count: m.requests.WithLabelValues(name, vs), seconds: m.requestSeconds.WithLabelValues(name, vs)}
	if !slot.CompareAndSwap(nil, rm) {
		return slot.Load() // the same children: WithLabelValues returns the existing ones
	}
	return rm
}

// topic returns the children of a topic (once per opened partition).
func (m *metrics) topic(name string) *topicMetrics {
	return &topicMetrics{
		bytesIn:    m.bytesIn.WithLabelValues(name),
		bytesOut:   m.bytesOut.WithLabelValues(name),
		recordsIn:  m.recordsIn.WithLabelValues(name),
		recordsOut: m.recordsOut.WithLabelValues(name),
	}
}

// forgetTopic drops a deleted topic's series.
func (m *metrics) forgetTopic(name string) {
	for _, v := range []*prometheus.CounterVec{m.bytesIn, m.bytesOut, m.recordsIn, m.recordsOut} {
		v.DeleteLabelValues(name)
	}
}

// shareGroup returns the children of a share group.
func (m *metrics) shareGroup(group string) *shareGroupMetrics {
	return &shareGroupMetrics{
		lockExpiries: m.lockExpiries.WithLabelValues(group),
		archived:     m.archived.WithLabelValues(group),
	}
}

// acquired records the delivery counts of records handed out.
func (m *metrics) acquired(acq []sharegroup.Acquired) {
	for _, a := range acq {
		i := int(a.DeliveryCount)
		if i < 0 {
			i = 0
		}
		if i > maxTrackedDeliveryCount {
			i = maxTrackedDeliveryCount + 1
		}
		m.deliveryCounts[i].Add(uint64(a.Last - a.First + 1))
	}
}

// shareEffects records what one share-partition operation did.
func (gm *shareGroupMetrics) shareEffects(eff sharegroup.Effects) {
	if eff.Expired > 0 {
		gm.lockExpiries.Add(float64(eff.Expired))
	}
	if eff.Archived > 0 {
		gm.archived.Add(float64(eff.Archived))
	}
}

// stateCollector reads the broker's state at scrape time. Before the
// broker is ready (recovery still running) it reports nothing, so a
// scrape never races with Start building the state.
type stateCollector struct{ b *Broker }

var (
	descLogStart = prometheus.NewDesc("shoal_partition_log_start_offset",
		"First offset still in the partition log.", []string{"topic", "partition"}, nil)
	descLogEnd = prometheus.NewDesc("shoal_partition_log_end_offset",
		"Offset the next appended record gets.", []string{"topic", "partition"}, nil)
	descHighWatermark = prometheus.NewDesc("shoal_partition_high_watermark",
		"Offset up to which records are visible to consumers (fsynced under --fsync=always).", []string{"topic", "partition"}, nil)
	descPartitionBytes = prometheus.NewDesc("shoal_partition_size_bytes",
		"Bytes of the partition's segment files.", []string{"topic", "partition"}, nil)
	descGroupLag = prometheus.NewDesc("shoal_consumer_group_lag",
		"High watermark minus committed offset, by consumer group and partition.", []string{"group", "topic", "partition"}, nil)
	descShareRecords = prometheus.NewDesc("shoal_share_partition_records",
		"Records in a share-partition's in-flight window, by state (available, acquired, acknowledged, archived, archiving).",
		[]string{"group", "topic", "partition", "state"}, nil)
	descShareLag = prometheus.NewDesc("shoal_share_partition_lag",
		"Records of a share-partition not yet delivered to completion (KIP-1226 lag).", []string{"group", "topic", "partition"}, nil)
	descDeliveryCount = prometheus.NewDesc("shoal_share_delivery_count",
		"Delivery count of each record handed out by ShareFetch (1: first delivery).", nil, nil)
	descSegmentBytes = prometheus.NewDesc("shoal_log_segments_bytes",
		"Bytes of all partition segment files.", nil, nil)
	descBadgerBytes = prometheus.NewDesc("shoal_badger_bytes",
		"Size of the badger metadata store on disk, by part (lsm, vlog).", []string{"part"}, nil)
	descDiskTotal = prometheus.NewDesc("shoal_log_dir_total_bytes",
		"Size of the file system holding the data directory.", nil, nil)
	descDiskUsable = prometheus.NewDesc("shoal_log_dir_usable_bytes",
		"Bytes available to Shoal on the file system holding the data directory.", nil, nil)
	descReady = prometheus.NewDesc("shoal_ready",
		"1 once recovery has finished and the broker serves clients.", nil, nil)
)

func (sc *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLogStart, descLogEnd, descHighWatermark, descPartitionBytes,
		descGroupLag, descShareRecords, descShareLag, descDeliveryCount, descSegmentBytes, descBadgerBytes,
		descDiskTotal, descDiskUsable, descReady} {
		ch <- d
	}
}

func (sc *stateCollector) Collect(ch chan<- prometheus.Metric) {
	b := sc.b
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if !b.ready.Load() {
		gauge(descReady, 0)
		return
	}
	gauge(descReady, 1)

	// Partitions.
	hw := map[groupTP]int64{}
	var segments int64
	for _, t := range b.topics.all() {
		parts, _ := b.topics.snapshot(t)
		for _, p := range parts {
			ps := strconv.Itoa(int(p.index))
			h := p.log.HighWatermark()
			size := p.log.Size()
			hw[groupTP{t.name, p.index}] = h
			segments += size
			gauge(descLogStart, float64(p.log.LogStartOffset()), t.name, ps)
			gauge(descLogEnd, float64(p.log.LogEndOffset()), t.name, ps)
			gauge(descHighWatermark, float64(h), t.name, ps)
			gauge(descPartitionBytes, float64(size), t.name, ps)
		}
	}
	gauge(descSegmentBytes, float64(segments))

	// Consumer-group lag, for partitions that exist.
	for _, g := range b.groups.all() {
		g.mu.Lock()
		offsets := make(map[groupTP]int64, len(g.mu.offsets))
		for tp, oc := range g.mu.offsets {
			offsets[tp] = oc.offset
		}
		g.mu.Unlock()
		for tp, off := range offsets {
			if h, ok := hw[tp]; ok {
				gauge(descGroupLag, float64(max(h-off, 0)), g.name, tp.topic, strconv.Itoa(int(tp.partition)))
			}
		}
	}

	// Share-partitions loaded in memory.
	for _, sp := range b.shares.loadedParts() {
		t := b.topics.getID(sp.key.TopicID)
		if t == nil {
			continue
		}
		var counts [5]int64 // by sharegroup.RecordState
		var lag int64
		sp.mu.Lock()
		p := sp.mu.p
		if p != nil {
			for _, r := range p.Ranges() {
				if int(r.State) < len(counts) {
					counts[r.State] += r.Last - r.First + 1
				}
			}
			if h, ok := hw[groupTP{t.name, sp.key.Partition}]; ok {
				lag = p.Lag(h)
			}
		}
		sp.mu.Unlock()
		if p == nil {
			continue
		}
		ps := strconv.Itoa(int(sp.key.Partition))
		for s, n := range counts {
			gauge(descShareRecords, float64(n), sp.key.Group, t.name, ps, sharegroup.RecordState(s).String())
		}
		gauge(descShareLag, float64(lag), sp.key.Group, t.name, ps)
	}

	// Delivery counts as a cumulative histogram: buckets le=1..25.
	var (
		buckets = make(map[float64]uint64, maxTrackedDeliveryCount)
		cum     uint64
		sum     float64
	)
	for n := 0; n <= maxTrackedDeliveryCount+1; n++ {
		c := b.metrics.deliveryCounts[n].Load()
		cum += c
		sum += float64(n) * float64(c)
		if n >= 1 && n <= maxTrackedDeliveryCount {
			buckets[float64(n)] = cum
		}
	}
	ch <- prometheus.MustNewConstHistogram(descDeliveryCount, cum, sum, buckets)

	// Disk usage. badger's own DB.Size is refreshed once a minute; the
	// directory listing is current and small (a few files).
	lsm, vlog := badgerDiskUsage(filepath.Join(b.cfg.DataDir, "meta"))
	gauge(descBadgerBytes, float64(lsm), "lsm")
	gauge(descBadgerBytes, float64(vlog), "vlog")
	total, usable := diskSpace(b.cfg.DataDir)
	if total >= 0 {
		gauge(descDiskTotal, float64(total))
	}
	if usable >= 0 {
		gauge(descDiskUsable, float64(usable))
	}
}

// badgerDiskUsage sums the sizes of badger's table files (.sst: the LSM
// tree) and value log files (.vlog) in dir.
func badgerDiskUsage(dir string) (lsm, vlog int64) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		switch {
		case strings.HasSuffix(e.Name(), ".sst"):
			lsm += info.Size()
		case strings.HasSuffix(e.Name(), ".vlog"):
			vlog += info.Size()
		}
	}
	return lsm, vlog
}
