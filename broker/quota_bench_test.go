package broker

import (
	"testing"
	"time"
)

// BenchmarkQuotaCharge is the per-request cost of the quota path: no
// quota configured (every request pays this), and a client-id quota
// matched through a default entity and charged.
func BenchmarkQuotaCharge(b *testing.B) {
	id := clientIdent{user: anonymousUser, clientID: "bench", ip: "127.0.0.1"}
	b.Run("none", func(b *testing.B) {
		q := &quotaManager{configs: map[quotaEntity]map[string]float64{}, buckets: map[string]*tokenBucket{}}
		now := time.Now()
		for i := 0; i < b.N; i++ {
			q.charge(now, q.clientLimits(nil, qProducerByteRate, id, 1000))
		}
	})
	b.Run("default-client-id", func(b *testing.B) {
		q := &quotaManager{configs: map[quotaEntity]map[string]float64{}, buckets: map[string]*tokenBucket{}}
		q.configs[entityOf(nil, &quotaPart{def: true}, nil)] = map[string]float64{qProducerByteRate: 1e12}
		now := time.Now()
		for i := 0; i < b.N; i++ {
			q.charge(now, q.clientLimits(nil, qProducerByteRate, id, 1000))
		}
	})
}
