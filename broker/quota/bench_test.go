package quota

import (
	"testing"
	"time"
)

// BenchmarkQuotaCharge is the per-request cost of the quota path: no
// quota configured (every request pays this), and a client-id quota
// matched through a default entity and charged.
func BenchmarkQuotaCharge(b *testing.B) {
	id := Ident{User: AnonymousUser, ClientID: "bench", IP: "127.0.0.1"}
	b.Run("none", func(b *testing.B) {
		q := &Manager{configs: map[entity]map[string]float64{}, buckets: map[string]*TokenBucket{}}
		now := time.Now()
		for i := 0; i < b.N; i++ {
			q.Charge(now, q.ClientLimits(nil, ProducerByteRate, id, 1000))
		}
	})
	b.Run("default-client-id", func(b *testing.B) {
		q := &Manager{configs: map[entity]map[string]float64{}, buckets: map[string]*TokenBucket{}}
		q.configs[entityOf(nil, &quotaPart{def: true}, nil)] = map[string]float64{ProducerByteRate: 1e12}
		now := time.Now()
		for i := 0; i < b.N; i++ {
			q.Charge(now, q.ClientLimits(nil, ProducerByteRate, id, 1000))
		}
	})
}
