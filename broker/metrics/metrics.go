package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Request holds the children for one (API key, version).
type Request struct {
	Count   prometheus.Counter
	Seconds prometheus.Observer
}

// Topic holds the children for one topic, shared by its partitions.
type Topic struct {
	BytesIn, BytesOut, RecordsIn, RecordsOut prometheus.Counter
}

// ShareGroup holds the children for one share group, kept by each of its
// share-partitions.
type ShareGroup struct {
	lockExpiries prometheus.Counter
	archived     prometheus.Counter
}

// maxTrackedDeliveryCount is the largest delivery count with its own
// histogram bucket (Kafka's group.share.max.delivery.count.limit is at
// most 25).
const maxTrackedDeliveryCount = 25

// API is one served Kafka API: its key, name and version range.
type API struct {
	Key      int16
	Name     string
	Min, Max int16
}

// Metrics holds the event collectors of one broker and its registry.
type Metrics struct {
	reg *prometheus.Registry

	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	// byAPI[key][version-min] is resolved on the first request of that
	// API and version (so the scrape lists only the pairs in use), then
	// loaded with one atomic read.
	byAPI []apiSlots

	bytesIn, bytesOut, recordsIn, recordsOut *prometheus.CounterVec

	// Connections (shoal_connections) and ConnectionsAccepted
	// (shoal_connections_accepted_total) are updated by the listener.
	Connections         prometheus.Gauge
	ConnectionsAccepted prometheus.Counter
	// AuthFailures (shoal_authentication_failures_total): failed SASL
	// authentications and refused TLS client certificates.
	AuthFailures prometheus.Counter
	// AuthzDenied (shoal_authorization_denied_total): authorization
	// checks that denied a request's operation on a resource (one per
	// resource refused, not per request).
	AuthzDenied prometheus.Counter

	// FsyncSeconds (shoal_fsync_duration_seconds) observes each
	// partition log fsync.
	FsyncSeconds prometheus.Histogram

	lockExpiries *prometheus.CounterVec
	archived     *prometheus.CounterVec
	// deliveryCounts[n] counts records handed out with delivery count n
	// (the last slot: above maxTrackedDeliveryCount); exported as a
	// histogram by the broker's state collector. Plain atomics because
	// one ShareFetch acquires whole ranges: one Add per range, not one
	// Observe per record.
	deliveryCounts [maxTrackedDeliveryCount + 2]atomic.Uint64

	// DLQRecords (shoal_share_dlq_records_total{group}) counts records
	// written to a share group's dead-letter topic; QuotaThrottle
	// (shoal_quota_throttle_time_seconds{entity_type}) observes the
	// throttle time given to a client by a quota.
	DLQRecords    *prometheus.CounterVec
	QuotaThrottle *prometheus.HistogramVec
	// SQSRequests (shoal_sqs_requests_total{action,code}) counts SQS API
	// requests by action and AWS error code ("" on success); SQSSeconds
	// (shoal_sqs_request_duration_seconds{action}) their latency.
	SQSRequests *prometheus.CounterVec
	SQSSeconds  *prometheus.HistogramVec

	// The log cleaner (compacted topics): bytes it read and wrote, its
	// passes and their durations, and per partition the dirty ratio it
	// last saw and when it last cleaned.
	cleanerRead, cleanerWritten prometheus.Counter
	cleanerRuns                 *prometheus.CounterVec
	cleanerSeconds              prometheus.Histogram
	cleanerDirty, cleanerLast   *prometheus.GaugeVec
}

// CleanerRun records one cleaning pass.
func (m *Metrics) CleanerRun(read, written int64, took time.Duration, failed bool) {
	m.cleanerRead.Add(float64(read))
	m.cleanerWritten.Add(float64(written))
	result := "ok"
	if failed {
		result = "error"
	}
	m.cleanerRuns.WithLabelValues(result).Inc()
	m.cleanerSeconds.Observe(took.Seconds())
}

// CleanerDirty records a compacted partition's dirty ratio.
func (m *Metrics) CleanerDirty(topic string, partition int32, ratio float64) {
	m.cleanerDirty.WithLabelValues(topic, strconv.Itoa(int(partition))).Set(ratio)
}

// CleanerCleaned records when a partition was last cleaned.
func (m *Metrics) CleanerCleaned(topic string, partition int32, at time.Time) {
	m.cleanerLast.WithLabelValues(topic, strconv.Itoa(int(partition))).Set(float64(at.UnixNano()) / 1e9)
}

// apiSlots are one API's resolved children, by version-min.
type apiSlots struct {
	name  string
	min   int16
	slots []atomic.Pointer[Request]
}

// New builds the collectors for the served apis on a registry of their
// own, with state (the collectors that read the broker's state at scrape
// time) and Go's runtime and process collectors registered beside them.
func New(apis []API, state ...prometheus.Collector) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
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
	for _, a := range apis {
		if int(a.Key) >= len(m.byAPI) {
			m.byAPI = append(m.byAPI, make([]apiSlots, int(a.Key)+1-len(m.byAPI))...)
		}
		m.byAPI[a.Key] = apiSlots{name: a.Name, min: a.Min, slots: make([]atomic.Pointer[Request], a.Max-a.Min+1)}
	}
	topicCounter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"topic"})
	}
	m.bytesIn = topicCounter("shoal_topic_bytes_in_total", "Record batch bytes appended by Produce, by topic (idempotent duplicates excluded).")
	m.bytesOut = topicCounter("shoal_topic_bytes_out_total", "Record batch bytes returned by Fetch and ShareFetch, by topic.")
	m.recordsIn = topicCounter("shoal_topic_records_in_total", "Records appended by Produce, by topic (idempotent duplicates excluded).")
	m.recordsOut = topicCounter("shoal_topic_records_out_total", "Records acquired by ShareFetch, by topic (Fetch returns whole batches and is counted in bytes only).")
	m.Connections = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shoal_connections",
		Help: "Open client connections.",
	})
	m.ConnectionsAccepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shoal_connections_accepted_total",
		Help: "Client connections accepted.",
	})
	m.AuthFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shoal_authentication_failures_total",
		Help: "Failed SASL authentications and refused TLS client certificates.",
	})
	m.AuthzDenied = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shoal_authorization_denied_total",
		Help: "Authorization checks that denied an operation on a resource (ACLs).",
	})
	m.FsyncSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
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
	m.SQSRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shoal_sqs_requests_total",
		Help: "SQS API requests by action and AWS error code (empty: success)."}, []string{"action", "code"})
	m.SQSSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "shoal_sqs_request_duration_seconds",
		Help:    "SQS API request latency by action (a long poll's wait included).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"action"})
	m.cleanerRead = prometheus.NewCounter(prometheus.CounterOpts{Name: "shoal_log_cleaner_bytes_read_total",
		Help: "Segment bytes the log cleaner read (compacted topics)."})
	m.cleanerWritten = prometheus.NewCounter(prometheus.CounterOpts{Name: "shoal_log_cleaner_bytes_written_total",
		Help: "Segment bytes the log cleaner wrote."})
	m.cleanerRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shoal_log_cleaner_runs_total",
		Help: "Cleaning passes of one partition, by result (ok, error)."}, []string{"result"})
	m.cleanerSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "shoal_log_cleaner_run_duration_seconds",
		Help: "Duration of one cleaning pass of one partition.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)})
	m.cleanerDirty = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shoal_log_cleaner_dirty_ratio",
		Help: "A compacted partition's dirty ratio (uncleaned bytes over cleanable bytes) as the cleaner last saw it."}, []string{"topic", "partition"})
	m.cleanerLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shoal_log_cleaner_last_clean_timestamp_seconds",
		Help: "When the cleaner last rewrote a compacted partition (Unix seconds); time since is now minus it."}, []string{"topic", "partition"})
	m.reg.MustRegister(
		m.cleanerRead, m.cleanerWritten, m.cleanerRuns, m.cleanerSeconds, m.cleanerDirty, m.cleanerLast,
		m.requests, m.requestSeconds,
		m.bytesIn, m.bytesOut, m.recordsIn, m.recordsOut,
		m.Connections, m.ConnectionsAccepted, m.AuthFailures, m.AuthzDenied,
		m.FsyncSeconds,
		m.lockExpiries, m.archived, m.DLQRecords, m.QuotaThrottle, m.SQSRequests, m.SQSSeconds,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.reg.MustRegister(state...)
	return m
}

// Registry is the registry /metrics serves.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Request returns the children for a served (key, version); the caller
// has checked the version against the API's range.
func (m *Metrics) Request(key, version int16) *Request {
	a := &m.byAPI[key]
	slot := &a.slots[version-a.min]
	if rm := slot.Load(); rm != nil {
		return rm
	}
	vs := strconv.Itoa(int(version))
	rm := &Request{Count: m.requests.WithLabelValues(a.name, vs), Seconds: m.requestSeconds.WithLabelValues(a.name, vs)}
	if !slot.CompareAndSwap(nil, rm) {
		return slot.Load() // the same children: WithLabelValues returns the existing ones
	}
	return rm
}

// Topic returns the children of a topic (once per opened partition).
func (m *Metrics) Topic(name string) *Topic {
	return &Topic{
		BytesIn:    m.bytesIn.WithLabelValues(name),
		BytesOut:   m.bytesOut.WithLabelValues(name),
		RecordsIn:  m.recordsIn.WithLabelValues(name),
		RecordsOut: m.recordsOut.WithLabelValues(name),
	}
}

// ForgetTopic drops a deleted topic's series.
func (m *Metrics) ForgetTopic(name string) {
	for _, v := range []*prometheus.CounterVec{m.bytesIn, m.bytesOut, m.recordsIn, m.recordsOut} {
		v.DeleteLabelValues(name)
	}
}

// ShareGroup returns the children of a share group.
func (m *Metrics) ShareGroup(group string) *ShareGroup {
	return &ShareGroup{
		lockExpiries: m.lockExpiries.WithLabelValues(group),
		archived:     m.archived.WithLabelValues(group),
	}
}

// Delivered counts n records handed out with deliveryCount.
func (m *Metrics) Delivered(deliveryCount int16, n int64) {
	i := int(deliveryCount)
	if i < 0 {
		i = 0
	}
	if i > maxTrackedDeliveryCount {
		i = maxTrackedDeliveryCount + 1
	}
	m.deliveryCounts[i].Add(uint64(n))
}

// DeliveryHistogram is the delivery counts so far as a cumulative
// histogram (count, sum, buckets le=1..maxTrackedDeliveryCount), for
// prometheus.MustNewConstHistogram.
func (m *Metrics) DeliveryHistogram() (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, maxTrackedDeliveryCount)
	for n := 0; n <= maxTrackedDeliveryCount+1; n++ {
		c := m.deliveryCounts[n].Load()
		count += c
		sum += float64(n) * float64(c)
		if n >= 1 && n <= maxTrackedDeliveryCount {
			buckets[float64(n)] = count
		}
	}
	return count, sum, buckets
}

// Observe records what one share-partition operation did: records whose
// acquisition lock expired, and records that became Archived.
func (g *ShareGroup) Observe(expired, archived int64) {
	if expired > 0 {
		g.lockExpiries.Add(float64(expired))
	}
	if archived > 0 {
		g.archived.Add(float64(archived))
	}
}
