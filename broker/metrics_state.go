package broker

// The state metrics: read from the broker's state at scrape time
// (partition offsets and sizes, consumer-group lag, share-group records
// per state, disk usage); the event metrics are package metrics'.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/groups"
	"github.com/shoal-mq/shoal/broker/metrics"
	"github.com/shoal-mq/shoal/sharegroup"
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// newMetrics builds the broker's metrics: package metrics' event
// collectors for the served APIs, with the state collector beside them.
func newMetrics(b *Broker) *metrics.Metrics {
	served := servedAPIs()
	rows := make([]metrics.API, len(served))
	for i, a := range served {
		rows[i] = metrics.API{Key: a.key, Name: kmsg.NameForKey(a.key), Min: a.min, Max: a.max}
	}
	return metrics.New(rows, &stateCollector{b: b})
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
	hw := map[groups.TP]int64{}
	names := map[[16]byte]string{} // topic id → name
	var segments int64
	for _, t := range b.topics.All() {
		names[t.ID] = t.Name
		parts, _ := b.topics.Snapshot(t)
		for _, p := range parts {
			ps := strconv.Itoa(int(p.Index))
			h := p.Log.HighWatermark()
			size := p.Log.Size()
			hw[groups.TP{Topic: t.Name, Partition: p.Index}] = h
			segments += size
			gauge(descLogStart, float64(p.Log.LogStartOffset()), t.Name, ps)
			gauge(descLogEnd, float64(p.Log.LogEndOffset()), t.Name, ps)
			gauge(descHighWatermark, float64(h), t.Name, ps)
			gauge(descPartitionBytes, float64(size), t.Name, ps)
		}
	}
	gauge(descSegmentBytes, float64(segments))

	// Consumer-group lag, for partitions that exist.
	b.groups.CommittedOffsets(func(group string, offsets map[groups.TP]int64) {
		for tp, off := range offsets {
			if h, ok := hw[tp]; ok {
				gauge(descGroupLag, float64(max(h-off, 0)), group, tp.Topic, strconv.Itoa(int(tp.Partition)))
			}
		}
	})

	// Share-partitions loaded in memory.
	// (hwOf runs under a sharePart.mu: map reads only.)
	hwOf := func(id [16]byte, partition int32) (int64, bool) {
		name, ok := names[id]
		if !ok {
			return 0, false
		}
		h, ok := hw[groups.TP{Topic: name, Partition: partition}]
		return h, ok
	}
	b.shares.PartStates(hwOf, func(key store.Key, counts [5]int64, lag int64) {
		t := b.topics.GetID(key.TopicID)
		if t == nil {
			return // its topic is gone
		}
		name := t.Name
		ps := strconv.Itoa(int(key.Partition))
		for s, n := range counts {
			gauge(descShareRecords, float64(n), key.Group, name, ps, sharegroup.RecordState(s).String())
		}
		gauge(descShareLag, float64(lag), key.Group, name, ps)
	})

	// Delivery counts as a cumulative histogram: buckets le=1..25.
	cum, sum, buckets := b.metrics.DeliveryHistogram()
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
