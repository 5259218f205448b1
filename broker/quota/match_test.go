package quota

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQuotaMatching: within an entity kind the specific name beats the
// default; every kind that sets the key applies (tightest wins), each
// with its own bucket.
func TestQuotaMatching(t *testing.T) {
	q := &Manager{configs: map[entity]map[string]float64{}}
	name := func(n string) *quotaPart { return &quotaPart{name: n} }
	def := &quotaPart{def: true}
	set := func(e entity, v float64) { q.configs[e] = map[string]float64{ProducerByteRate: v} }
	set(entityOf(def, nil, nil), 1000)                         // default user
	set(entityOf(nil, def, nil), 500)                          // default client-id
	set(entityOf(nil, name("noisy"), nil), 100)                // client-id noisy
	set(entityOf(def, def, nil), 700)                          // default user + default client-id
	set(entityOf(name(AnonymousUser), name("noisy"), nil), 50) // user + client-id
	set(entityOf(nil, nil, def), 9000)                         // default ip

	limits := func(client string) map[string]float64 {
		out := map[string]float64{}
		for _, l := range q.ClientLimits(nil, ProducerByteRate, Ident{AnonymousUser, client, "10.0.0.1"}, 1) {
			out[l.Key] = l.Rate
		}
		return out
	}
	require.Equal(t, map[string]float64{
		"producer_byte_rate|ip=10.0.0.1&":                    9000,
		"producer_byte_rate|user=ANONYMOUS&client-id=noisy&": 50,
		"producer_byte_rate|user=ANONYMOUS&":                 1000,
		"producer_byte_rate|client-id=noisy&":                100,
	}, limits("noisy"))
	require.Equal(t, map[string]float64{
		"producer_byte_rate|ip=10.0.0.1&":                    9000,
		"producer_byte_rate|user=ANONYMOUS&client-id=quiet&": 700,
		"producer_byte_rate|user=ANONYMOUS&":                 1000,
		"producer_byte_rate|client-id=quiet&":                500,
	}, limits("quiet"), "defaults give each client-id its own bucket")
	require.Empty(t, q.ClientLimits(nil, ConsumerByteRate, Ident{AnonymousUser, "noisy", "10.0.0.1"}, 1))
}
