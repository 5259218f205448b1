package quota

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/meta"
)

// Entity types, as Kafka names them.
const (
	quotaUser     = "user"
	quotaClientID = "client-id"
	quotaIP       = "ip"
	// AnonymousUser is Kafka's principal name for an unauthenticated
	// client (a plaintext connection, or TLS without a client
	// certificate).
	AnonymousUser = "ANONYMOUS"
)

// Quota keys.
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
	ConnectionCreationRate = "connection_creation_rate"
	RequestRate            = "request_rate"
	qMode                  = "quota_mode"
	burstSuffix            = "_burst"
)

// quotaRates lists the rate keys: whether a value must be integral (a
// Kafka LONG or INT) and whether the user/client-id entities take it.
var quotaRates = map[string]struct{ integral, client bool }{
	ProducerByteRate:       {true, true},
	ConsumerByteRate:       {true, true},
	RequestPercentage:      {false, true},
	ControllerMutationRate: {false, true},
	RequestRate:            {false, true},
	ConnectionCreationRate: {true, false},
}

// entity is one entity: for each type (user, client-id, ip) whether
// it is part of the entity, and its name ("" with def for the default).
type entity [3]quotaPart

type quotaPart struct {
	set, def bool
	name     string
}

var quotaTypes = [3]string{quotaUser, quotaClientID, quotaIP}

func quotaTypeIndex(t string) int {
	for i, qt := range quotaTypes {
		if qt == t {
			return i
		}
	}
	return -1
}

// storeKey is the entity's metadata key suffix: type=name parts joined
// by '&', names query-escaped, a default written as type=<default>
// (the escaping keeps a name "<default>" distinct).
func (e entity) storeKey() string {
	var parts []string
	for i, p := range e {
		if !p.set {
			continue
		}
		name := "<default>"
		if !p.def {
			name = url.QueryEscape(p.name)
		}
		parts = append(parts, quotaTypes[i]+"="+name)
	}
	return strings.Join(parts, "&")
}

// components are the entity's parts in Kafka's order (user, client-id,
// ip), a default one with a nil name.
func (e entity) components() []Component {
	var out []Component
	for i, p := range e {
		if !p.set {
			continue
		}
		c := Component{Type: quotaTypes[i]}
		if !p.def {
			name := p.name
			c.Name = &name
		}
		out = append(out, c)
	}
	return out
}

func parseQuotaStoreKey(s string) (entity, error) {
	var e entity
	for _, part := range strings.Split(s, "&") {
		t, name, ok := strings.Cut(part, "=")
		i := quotaTypeIndex(t)
		if !ok || i < 0 {
			return e, fmt.Errorf("broker: bad client quota key %q", s)
		}
		e[i].set = true
		if name == "<default>" {
			e[i].def = true
			continue
		}
		n, err := url.QueryUnescape(name)
		if err != nil {
			return e, fmt.Errorf("broker: bad client quota key %q: %w", s, err)
		}
		e[i].name = n
	}
	return e, nil
}

// Manager holds the client quota configs and every token bucket.
type Manager struct {
	// throttled observes, per scope (quotaScope), each throttle-mode
	// limit that made a client wait (shoal_quota_throttle_time_seconds);
	// nil in tests that build a manager alone.
	throttled func(scope string, d time.Duration)
	writeMu   sync.Mutex // serialises AlterClientQuotas
	cfgMu     sync.RWMutex
	configs   map[entity]map[string]float64

	mu        sync.Mutex
	buckets   map[string]*TokenBucket
	lastSweep time.Time

	conns *ConnCounts // open connections, for the connection limits (conns.go)

	db *badger.DB // where the entity configs are persisted
}

// New loads the entity configs from db, where Alter persists them.
// throttled, if not nil, observes per scope (user, client-id,
// user+client-id, ip, broker, topic, share-group) each throttle-mode limit
// that made a client wait. It runs under Manager.mu, so it must not block
// or take a lock of Shoal's (observing a Prometheus histogram is fine).
func New(db *badger.DB, throttled func(scope string, d time.Duration)) (*Manager, error) {
	q := &Manager{configs: map[entity]map[string]float64{}, buckets: map[string]*TokenBucket{}, conns: newConnCounts(), db: db, throttled: throttled}
	err := meta.ScanJSON(db, meta.PrefixClientQuota, func(name string, m map[string]float64) error {
		e, err := parseQuotaStoreKey(name)
		if err != nil {
			return err
		}
		q.configs[e] = m
		return nil
	})
	return q, err
}

// Limit is one bucket a use is charged to.
type Limit struct {
	Key         string // bucket identity
	Rate, Burst float64
	Reject      bool
	N           float64 // tokens this use costs
}

// Ident is who a connection is, for quota matching.
type Ident struct{ User, ClientID, IP string }

// lookupLocked returns the entity config that sets key among candidates,
// in order, with the bucket name for it.
func (q *Manager) lookupLocked(key string, candidates []entity, id Ident) (map[string]float64, string, bool) {
	for _, e := range candidates {
		m := q.configs[e]
		if _, ok := m[key]; !ok {
			continue
		}
		// The bucket: the matched entity with defaults filled in.
		names := [3]string{id.User, id.ClientID, id.IP}
		var b strings.Builder
		for i, p := range e {
			if p.set {
				b.WriteString(quotaTypes[i])
				b.WriteByte('=')
				b.WriteString(url.QueryEscape(names[i]))
				b.WriteByte('&')
			}
		}
		return m, b.String(), true
	}
	return nil, "", false
}

func entityOf(user, client, ip *quotaPart) entity {
	var e entity
	for i, p := range []*quotaPart{user, client, ip} {
		if p != nil {
			e[i] = *p
			e[i].set = true
		}
	}
	return e
}

// ClientLimits appends the user/client-id and ip limits of key for id.
func (q *Manager) ClientLimits(out []Limit, key string, id Ident, n float64) []Limit {
	q.cfgMu.RLock()
	defer q.cfgMu.RUnlock()
	if len(q.configs) == 0 {
		return out
	}
	u, du := &quotaPart{name: id.User}, &quotaPart{def: true}
	c, dc := &quotaPart{name: id.ClientID}, &quotaPart{def: true}
	ip, dip := &quotaPart{name: id.IP}, &quotaPart{def: true}
	families := [][]entity{{entityOf(nil, nil, ip), entityOf(nil, nil, dip)}}
	if quotaRates[key].client {
		families = append(families,
			[]entity{entityOf(u, c, nil), entityOf(u, dc, nil), entityOf(du, c, nil), entityOf(du, dc, nil)},
			[]entity{entityOf(u, nil, nil), entityOf(du, nil, nil)},
			[]entity{entityOf(nil, c, nil), entityOf(nil, dc, nil)})
	}
	for _, family := range families {
		if m, name, ok := q.lookupLocked(key, family, id); ok {
			out = append(out, entityLimit(m, key, key+"|"+name, n))
		}
	}
	return out
}

func entityLimit(m map[string]float64, key, bucket string, n float64) Limit {
	return Limit{Key: bucket, Rate: m[key], Burst: m[key+burstSuffix], Reject: m[qMode] == 1, N: n}
}

// Charge applies one use to every limit, all or nothing: if a
// reject-mode limit cannot cover it nothing is spent and rejected is
// true, with the time after which a retry can pass. Otherwise every
// bucket is charged and wait is how long the client must back off (the
// tightest throttle-mode limit).
func (q *Manager) Charge(now time.Time, limits []Limit) (rejected bool, wait time.Duration) {
	if len(limits) == 0 {
		return false, 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweepLocked(now)
	bs := make([]*TokenBucket, len(limits))
	for i, l := range limits {
		bs[i] = q.bucketLocked(now, l.Key, l.Rate, l.Burst)
	}
	for i, l := range limits {
		if !l.Reject {
			continue
		}
		if ok, w := bs[i].canTake(now); !ok {
			rejected, wait = true, max(wait, w)
		}
	}
	if rejected {
		return true, wait
	}
	return false, q.takeAll(now, limits, bs)
}

// Take charges every limit without refusing (a use already done) and
// returns the throttle owed to the throttle-mode ones.
func (q *Manager) Take(now time.Time, limits []Limit) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	bs := make([]*TokenBucket, len(limits))
	for i, l := range limits {
		bs[i] = q.bucketLocked(now, l.Key, l.Rate, l.Burst)
	}
	return q.takeAll(now, limits, bs)
}

func (q *Manager) takeAll(now time.Time, limits []Limit, bs []*TokenBucket) (wait time.Duration) {
	for i, l := range limits {
		if w := bs[i].Take(now, l.N); !l.Reject {
			wait = max(wait, w)
			if w > 0 && q.throttled != nil {
				q.throttled(quotaScope(l.Key), w)
			}
		}
	}
	return wait
}

// quotaScope names the scope of a bucket key for metrics: broker, topic,
// share-group, or the client entity type (user, client-id,
// user+client-id, ip).
func quotaScope(bucket string) string {
	switch {
	case strings.HasPrefix(bucket, "b|"):
		return "broker"
	case strings.HasPrefix(bucket, "t|"):
		return "topic"
	case strings.HasPrefix(bucket, "s|"):
		return "share-group"
	}
	_, entity, _ := strings.Cut(bucket, "|")
	var types []string
	for part := range strings.SplitSeq(entity, "&") {
		if typ, _, ok := strings.Cut(part, "="); ok {
			types = append(types, typ)
		}
	}
	if len(types) == 0 {
		return "unknown"
	}
	return strings.Join(types, "+")
}

// Debt returns how long until every limit's bucket is out of debt, and
// whether a reject-mode one is in debt (nothing is charged).
func (q *Manager) Debt(now time.Time, limits []Limit) (rejected bool, wait time.Duration) {
	rejected, wait, _ = q.Available(now, limits)
	return rejected, wait
}

// Available is debt plus the fewest tokens any of the buckets holds.
func (q *Manager) Available(now time.Time, limits []Limit) (rejected bool, wait time.Duration, tokens float64) {
	tokens = math.Inf(1)
	if len(limits) == 0 {
		return false, 0, tokens
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, l := range limits {
		b := q.bucketLocked(now, l.Key, l.Rate, l.Burst)
		b.refill(now)
		tokens = min(tokens, b.tokens)
		if w := b.wait(0); w > 0 {
			wait = max(wait, w)
			rejected = rejected || l.Reject
		}
	}
	return rejected, wait, tokens
}

func (q *Manager) bucketLocked(now time.Time, key string, rate, burst float64) *TokenBucket {
	b := q.buckets[key]
	if b == nil {
		b = NewTokenBucket(rate, burst, now)
		q.buckets[key] = b
		return b
	}
	if eff := burstOr(rate, burst); b.rate != rate || b.burst != eff {
		b.refill(now)
		b.SetLimit(rate, burst)
	}
	return b
}

// Grant grants up to want tokens of the bucket key (rate per second, a
// burst of one second of it), for a use that settles afterwards
// (Settle); with nothing granted, retry says when a token is there.
func (q *Manager) Grant(key string, rate float64, want int) (granted int, retry time.Duration) {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bucketLocked(now, key, rate, 0).Grant(now, want)
}

// Settle ends a Grant of granted tokens of which got were used: the rest
// is refunded, and use beyond the grant is charged as debt, so the rate
// holds over time.
func (q *Manager) Settle(key string, rate float64, granted, got int) {
	if got == granted {
		return
	}
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	bk := q.bucketLocked(now, key, rate, 0)
	if got < granted {
		bk.Refund(float64(granted - got))
	} else {
		bk.Take(now, float64(got-granted))
	}
}

// Conns are the open connection counts the connection limits use.
func (q *Manager) Conns() *ConnCounts { return q.conns }

func burstOr(rate, burst float64) float64 {
	if burst <= 0 {
		return rate
	}
	return burst
}

// sweepLocked drops buckets that have refilled completely (a fresh one
// is the same), at most every 10 seconds, so per-client buckets of
// clients gone do not accumulate.
func (q *Manager) sweepLocked(now time.Time) {
	if now.Sub(q.lastSweep) < 10*time.Second {
		return
	}
	q.lastSweep = now
	for k, b := range q.buckets {
		if b.IdleFull(now) {
			delete(q.buckets, k)
		}
	}
}

// validateQuotaEntity checks an AlterClientQuotas entity as Kafka's
// controller does; failures are INVALID_REQUEST.
func validateQuotaEntity(comps []Component) (entity, error) {
	var e entity
	if len(comps) == 0 {
		return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid empty client quota entity")
	}
	for _, c := range comps {
		i := quotaTypeIndex(c.Type)
		if i < 0 {
			return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Unhandled client quota entity type: %s", c.Type)
		}
		if e[i].set {
			return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Duplicate %s entity", c.Type)
		}
		e[i].set = true
		if c.Name == nil {
			e[i].def = true
			continue
		}
		if *c.Name == "" {
			return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Empty %s not supported", c.Type)
		}
		if i == 2 && net.ParseIP(*c.Name) == nil {
			return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "%s is not a valid IP or resolvable host.", *c.Name)
		}
		e[i].name = *c.Name
	}
	if e[2].set && (e[0].set || e[1].set) {
		return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid quota entity combination, IP entity should not be combined with User or ClientId")
	}
	return e, nil
}

// Component is one part of an AlterClientQuotas entity: an entity type
// (user, client-id, ip) and a name, nil for the default.
type Component struct {
	Type string
	Name *string
}

// validateQuotaKey checks one key and value for an entity.
func validateQuotaKey(e entity, key string, value float64, remove bool) error {
	rate := strings.TrimSuffix(key, burstSuffix)
	def, ok := quotaRates[rate]
	isIP := e[2].set
	switch {
	case key == qMode:
		if !remove && value != 0 && value != 1 {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid value %v for configuration %s: must be 0 (throttle) or 1 (reject)", value, key)
		}
		return nil
	case !ok || (!isIP && !def.client):
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid configuration key %s", key)
	case remove:
		return nil
	case math.IsNaN(value) || math.IsInf(value, 0):
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid value %v for configuration %s", value, key)
	case def.integral && math.Abs(value-math.Round(value)) > 1e-6:
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Configuration %s must be a Long value", key)
	case value <= 0:
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Quota %s must be greater than 0", key)
	}
	return nil
}

// Alter applies ops to one entity, all or nothing, persisting the
// result before it is used.
func (q *Manager) Alter(comps []Component, ops []Op, validateOnly bool) error {
	e, err := validateQuotaEntity(comps)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Key] {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Duplicate quota key %s", op.Key)
		}
		seen[op.Key] = true
		if err := validateQuotaKey(e, op.Key, op.Value, op.Remove); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	q.writeMu.Lock()
	defer q.writeMu.Unlock()
	q.cfgMu.RLock()
	next := map[string]float64{}
	for k, v := range q.configs[e] {
		next[k] = v
	}
	q.cfgMu.RUnlock()
	for _, op := range ops {
		if op.Remove {
			delete(next, op.Key)
		} else {
			next[op.Key] = op.Value
		}
	}
	key := []byte(meta.PrefixClientQuota + e.storeKey())
	if err := meta.PutJSONOrDelete(q.db, key, next); err != nil {
		return fmt.Errorf("broker: persist client quota: %w", err)
	}
	q.cfgMu.Lock()
	if len(next) == 0 {
		delete(q.configs, e)
	} else {
		q.configs[e] = next
	}
	q.cfgMu.Unlock()
	return nil
}

// Op is one AlterClientQuotas operation: set Key to Value, or remove it.
type Op struct {
	Key    string
	Value  float64
	Remove bool
}

// quotaFilter is one DescribeClientQuotas component.
type quotaFilter struct {
	idx   int
	match int8 // 0 exact, 1 default, 2 any specified name
	name  *string
}

// Describe lists the entities matching the filters (Kafka's
// ClientQuotasImage.describe rules).
func (q *Manager) Describe(in []FilterIn, strict bool) ([]Described, error) {
	comps, err := checkQuotaFilters(in)
	if err != nil {
		return nil, err
	}
	q.cfgMu.RLock()
	defer q.cfgMu.RUnlock()
	var out []Described
	for e, m := range q.configs {
		if !quotaMatches(e, comps, strict) {
			continue
		}
		vals := make(map[string]float64, len(m))
		for k, v := range m {
			vals[k] = v
		}
		out = append(out, Described{Components: e.components(), Values: vals, key: e.storeKey()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

// Described is one entity DescribeClientQuotas lists: its components
// and its quota values.
type Described struct {
	Components []Component
	Values     map[string]float64
	key        string // the entity's store key, the listing's order
}

func quotaMatches(e entity, comps []quotaFilter, strict bool) bool {
	var named [3]bool
	for _, c := range comps {
		named[c.idx] = true
		p := e[c.idx]
		if !p.set {
			return false
		}
		switch c.match {
		case 0:
			if c.name == nil {
				if !p.def {
					return false
				}
			} else if p.def || p.name != *c.name {
				return false
			}
		case 1:
			if !p.def {
				return false
			}
		case 2:
			if p.def {
				return false
			}
		}
	}
	if strict {
		for i, p := range e {
			if p.set && !named[i] {
				return false
			}
		}
	}
	return true
}

// checkQuotaFilters validates DescribeClientQuotas components as Kafka
// does: an unknown entity type is UNSUPPORTED_VERSION ("Custom entity
// type ... not supported"); the rest INVALID_REQUEST.
func checkQuotaFilters(in []FilterIn) ([]quotaFilter, error) {
	var out []quotaFilter
	var seen [3]bool
	for _, c := range in {
		if c.Type == "" {
			return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid empty entity type.")
		}
		i := quotaTypeIndex(c.Type)
		if i < 0 {
			return nil, kafkaerr.Refuse(kafkaerr.ErrQuotaEntityType, "Custom entity type %s not supported", c.Type)
		}
		if seen[i] {
			return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Entity type %s cannot appear more than once in the filter.", c.Type)
		}
		seen[i] = true
		switch c.Match {
		case 0:
		case 1:
			if c.Name != nil {
				return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string")
			}
		case 2:
			if c.Name != nil {
				return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
		default:
			return nil, kafkaerr.Refuse(kafkaerr.ErrQuotaEntityType, "Unknown match type %d", c.Match)
		}
		out = append(out, quotaFilter{idx: i, match: c.Match, name: c.Name})
	}
	if seen[2] && (seen[0] || seen[1]) {
		return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	return out, nil
}

// FilterIn is one DescribeClientQuotas component as the request has it:
// an entity type, a match type (0 exact, 1 default, 2 any specified
// name) and, for exact, the name (nil: the default).
type FilterIn struct {
	Type  string
	Match int8
	Name  *string
}
