package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

func TestRequestChildrenPerVersion(t *testing.T) {
	m := New([]API{{Key: 0, Name: "Produce", Min: 3, Max: 12}, {Key: 18, Name: "ApiVersions", Min: 0, Max: 4}})
	a, b := m.Request(0, 12), m.Request(0, 12)
	require.Same(t, a, b, "one child per (key, version)")
	a.Count.Inc()
	m.Request(18, 0).Count.Inc()
	var out dto.Metric
	require.NoError(t, m.Request(0, 12).Count.Write(&out))
	require.Equal(t, 1.0, out.GetCounter().GetValue())
	fams, err := m.Registry().Gather()
	require.NoError(t, err)
	labels := map[string]bool{}
	for _, f := range fams {
		if f.GetName() != "shoal_requests_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels[s.GetLabel()[0].GetValue()+"/"+s.GetLabel()[1].GetValue()] = true
		}
	}
	require.Equal(t, map[string]bool{"Produce/12": true, "ApiVersions/0": true}, labels, "only the pairs in use, by name")
}

func TestDeliveryHistogram(t *testing.T) {
	m := New(nil)
	m.Delivered(1, 10)
	m.Delivered(2, 3)
	m.Delivered(maxTrackedDeliveryCount+5, 1) // above the last bucket: in +Inf only
	count, sum, buckets := m.DeliveryHistogram()
	require.Equal(t, uint64(14), count)
	require.Equal(t, float64(10*1+3*2+(maxTrackedDeliveryCount+1)), sum)
	require.Equal(t, uint64(10), buckets[1])
	require.Equal(t, uint64(13), buckets[2])
	require.Equal(t, uint64(13), buckets[maxTrackedDeliveryCount])
	require.Len(t, buckets, maxTrackedDeliveryCount)
}

func TestStateCollectorsRegistered(t *testing.T) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "shoal_test_state", Help: "a state metric"})
	g.Set(7)
	m := New(nil, g)
	fams, err := m.Registry().Gather()
	require.NoError(t, err)
	found := false
	for _, f := range fams {
		found = found || f.GetName() == "shoal_test_state"
	}
	require.True(t, found)
}

// BenchmarkRequestMetrics is what the root's conn.go adds to every
// request: resolve the (API, version) children, count, time and observe.
func BenchmarkRequestMetrics(b *testing.B) {
	m := New([]API{{Key: 0, Name: "Produce", Min: 3, Max: 12}})
	b.ReportAllocs()
	for b.Loop() {
		rm := m.Request(0, 12)
		rm.Count.Inc()
		began := time.Now()
		rm.Seconds.Observe(time.Since(began).Seconds())
	}
}
