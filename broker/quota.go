package broker

// Client quotas and rate limits (issue 6).
//
// Entities are Kafka's (KIP-546): user, client-id, user+client-id and
// ip, each name either given or the default (a null name). Shoal has no
// authentication, so every connection's user is Kafka's unauthenticated
// principal, ANONYMOUS: a quota on user ANONYMOUS or on the default user
// applies to every client.
//
// Keys: Kafka's producer_byte_rate, consumer_byte_rate,
// request_percentage, controller_mutation_rate (user / client-id
// entities) and connection_creation_rate (ip), plus Shoal's request_rate
// (requests/s), a burst for each rate named <rate>_burst (in the rate's
// unit; unset: one second of the rate) and quota_mode (0 throttle, 1
// reject). As a Shoal extension the ip entity also takes the byte and
// request rates.
//
// Resolution, per key and per entity kind, the specific name before the
// default as in Kafka: user+client-id takes the first entity setting the
// key among (u, c), (u, default client), (default user, c), (default
// user, default client); user among (u), (default user); client-id among
// (c), (default client); ip among (ip), (default ip). The matched entity,
// its default names replaced by the connection's own, names the token
// bucket: a default client-id quota gives each client-id its own bucket.
// The burst and quota_mode come from the same entity.
//
// Composition (issue 6, where Kafka instead applies only the most
// specific of its eight user/client-id entities): every applicable scope
// has its own bucket — the user+client-id, user, client-id and ip ones
// above, the broker-wide one (broker.producer.byte.rate,
// broker.consumer.byte.rate, broker.request.rate), and per topic (topic
// configs producer.byte.rate, consumer.byte.rate) — and a request is
// charged to all of them, so the tightest limit decides. In throttle mode a request is always accepted
// and the response's ThrottleTimeMs (with the connection muted as long)
// pays back the debt; in reject mode a request that the bucket cannot
// cover is refused before anything is done (see produceQuota in
// quota_conn.go, and the README for the error per API).
//
// Ownership: quotaManager.cfgMu guards the entity configs (written under
// writeMu after the metadata store), quotaManager.mu the buckets; neither
// is held during I/O, and no other lock is taken while holding them.

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
	// anonymousUser is the user of every connection: Kafka's principal
	// name for an unauthenticated client.
	anonymousUser = "ANONYMOUS"
)

// Quota keys.
const (
	qProducerByteRate   = "producer_byte_rate"
	qConsumerByteRate   = "consumer_byte_rate"
	qRequestPercentage  = "request_percentage"
	qControllerMutation = "controller_mutation_rate"
	qConnectionCreation = "connection_creation_rate"
	qRequestRate        = "request_rate"
	qMode               = "quota_mode"
	burstSuffix         = "_burst"
)

// quotaRates lists the rate keys: whether a value must be integral (a
// Kafka LONG or INT) and whether the user/client-id entities take it.
var quotaRates = map[string]struct{ integral, client bool }{
	qProducerByteRate:   {true, true},
	qConsumerByteRate:   {true, true},
	qRequestPercentage:  {false, true},
	qControllerMutation: {false, true},
	qRequestRate:        {false, true},
	qConnectionCreation: {true, false},
}

// quotaEntity is one entity: for each type (user, client-id, ip) whether
// it is part of the entity, and its name ("" with def for the default).
type quotaEntity [3]quotaPart

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
func (e quotaEntity) storeKey() string {
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

func parseQuotaStoreKey(s string) (quotaEntity, error) {
	var e quotaEntity
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

// quotaManager holds the client quota configs and every token bucket.
type quotaManager struct {
	// throttled observes, per scope (quotaScope), each throttle-mode
	// limit that made a client wait (shoal_quota_throttle_time_seconds);
	// nil in tests that build a manager alone.
	throttled func(scope string, d time.Duration)
	writeMu   sync.Mutex // serialises AlterClientQuotas
	cfgMu     sync.RWMutex
	configs   map[quotaEntity]map[string]float64

	mu        sync.Mutex
	buckets   map[string]*tokenBucket
	lastSweep time.Time

	conns *connCounts // open connections, for the connection limits (quota_accept.go)
}

func newQuotaManager(db *badger.DB) (*quotaManager, error) {
	q := &quotaManager{configs: map[quotaEntity]map[string]float64{}, buckets: map[string]*tokenBucket{}, conns: newConnCounts()}
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

// quotaLimit is one bucket a use is charged to.
type quotaLimit struct {
	key         string // bucket identity
	rate, burst float64
	reject      bool
	n           float64 // tokens this use costs
}

// clientIdent is who a connection is, for quota matching.
type clientIdent struct{ user, clientID, ip string }

func (c *conn) ident() clientIdent {
	return clientIdent{user: anonymousUser, clientID: c.clientID, ip: c.quota.ip}
}

func remoteIP(nc net.Conn) string {
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// lookupLocked returns the entity config that sets key among candidates,
// in order, with the bucket name for it.
func (q *quotaManager) lookupLocked(key string, candidates []quotaEntity, id clientIdent) (map[string]float64, string, bool) {
	for _, e := range candidates {
		m := q.configs[e]
		if _, ok := m[key]; !ok {
			continue
		}
		// The bucket: the matched entity with defaults filled in.
		names := [3]string{id.user, id.clientID, id.ip}
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

func entityOf(user, client, ip *quotaPart) quotaEntity {
	var e quotaEntity
	for i, p := range []*quotaPart{user, client, ip} {
		if p != nil {
			e[i] = *p
			e[i].set = true
		}
	}
	return e
}

// clientLimits appends the user/client-id and ip limits of key for id.
func (q *quotaManager) clientLimits(out []quotaLimit, key string, id clientIdent, n float64) []quotaLimit {
	q.cfgMu.RLock()
	defer q.cfgMu.RUnlock()
	if len(q.configs) == 0 {
		return out
	}
	u, du := &quotaPart{name: id.user}, &quotaPart{def: true}
	c, dc := &quotaPart{name: id.clientID}, &quotaPart{def: true}
	ip, dip := &quotaPart{name: id.ip}, &quotaPart{def: true}
	families := [][]quotaEntity{{entityOf(nil, nil, ip), entityOf(nil, nil, dip)}}
	if quotaRates[key].client {
		families = append(families,
			[]quotaEntity{entityOf(u, c, nil), entityOf(u, dc, nil), entityOf(du, c, nil), entityOf(du, dc, nil)},
			[]quotaEntity{entityOf(u, nil, nil), entityOf(du, nil, nil)},
			[]quotaEntity{entityOf(nil, c, nil), entityOf(nil, dc, nil)})
	}
	for _, family := range families {
		if m, name, ok := q.lookupLocked(key, family, id); ok {
			out = append(out, entityLimit(m, key, key+"|"+name, n))
		}
	}
	return out
}

func entityLimit(m map[string]float64, key, bucket string, n float64) quotaLimit {
	return quotaLimit{key: bucket, rate: m[key], burst: m[key+burstSuffix], reject: m[qMode] == 1, n: n}
}

// charge applies one use to every limit, all or nothing: if a
// reject-mode limit cannot cover it nothing is spent and rejected is
// true, with the time after which a retry can pass. Otherwise every
// bucket is charged and wait is how long the client must back off (the
// tightest throttle-mode limit).
func (q *quotaManager) charge(now time.Time, limits []quotaLimit) (rejected bool, wait time.Duration) {
	if len(limits) == 0 {
		return false, 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweepLocked(now)
	bs := make([]*tokenBucket, len(limits))
	for i, l := range limits {
		bs[i] = q.bucketLocked(now, l.key, l.rate, l.burst)
	}
	for i, l := range limits {
		if !l.reject {
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

// take charges every limit without refusing (a use already done) and
// returns the throttle owed to the throttle-mode ones.
func (q *quotaManager) take(now time.Time, limits []quotaLimit) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	bs := make([]*tokenBucket, len(limits))
	for i, l := range limits {
		bs[i] = q.bucketLocked(now, l.key, l.rate, l.burst)
	}
	return q.takeAll(now, limits, bs)
}

func (q *quotaManager) takeAll(now time.Time, limits []quotaLimit, bs []*tokenBucket) (wait time.Duration) {
	for i, l := range limits {
		if w := bs[i].Take(now, l.n); !l.reject {
			wait = max(wait, w)
			if w > 0 && q.throttled != nil {
				q.throttled(quotaScope(l.key), w)
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

// debt returns how long until every limit's bucket is out of debt, and
// whether a reject-mode one is in debt (nothing is charged).
func (q *quotaManager) debt(now time.Time, limits []quotaLimit) (rejected bool, wait time.Duration) {
	rejected, wait, _ = q.available(now, limits)
	return rejected, wait
}

// available is debt plus the fewest tokens any of the buckets holds.
func (q *quotaManager) available(now time.Time, limits []quotaLimit) (rejected bool, wait time.Duration, tokens float64) {
	tokens = math.Inf(1)
	if len(limits) == 0 {
		return false, 0, tokens
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, l := range limits {
		b := q.bucketLocked(now, l.key, l.rate, l.burst)
		b.refill(now)
		tokens = min(tokens, b.tokens)
		if w := b.wait(0); w > 0 {
			wait = max(wait, w)
			rejected = rejected || l.reject
		}
	}
	return rejected, wait, tokens
}

func (q *quotaManager) bucketLocked(now time.Time, key string, rate, burst float64) *tokenBucket {
	b := q.buckets[key]
	if b == nil {
		b = newTokenBucket(rate, burst, now)
		q.buckets[key] = b
		return b
	}
	if eff := burstOr(rate, burst); b.rate != rate || b.burst != eff {
		b.refill(now)
		b.setLimit(rate, burst)
	}
	return b
}

func burstOr(rate, burst float64) float64 {
	if burst <= 0 {
		return rate
	}
	return burst
}

// sweepLocked drops buckets that have refilled completely (a fresh one
// is the same), at most every 10 seconds, so per-client buckets of
// clients gone do not accumulate.
func (q *quotaManager) sweepLocked(now time.Time) {
	if now.Sub(q.lastSweep) < 10*time.Second {
		return
	}
	q.lastSweep = now
	for k, b := range q.buckets {
		if b.idleFull(now) {
			delete(q.buckets, k)
		}
	}
}

// validateQuotaEntity checks an AlterClientQuotas entity as Kafka's
// controller does; failures are INVALID_REQUEST.
func validateQuotaEntity(comps []quotaComponent) (quotaEntity, error) {
	var e quotaEntity
	if len(comps) == 0 {
		return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid empty client quota entity")
	}
	for _, c := range comps {
		i := quotaTypeIndex(c.typ)
		if i < 0 {
			return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Unhandled client quota entity type: %s", c.typ)
		}
		if e[i].set {
			return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Duplicate %s entity", c.typ)
		}
		e[i].set = true
		if c.name == nil {
			e[i].def = true
			continue
		}
		if *c.name == "" {
			return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Empty %s not supported", c.typ)
		}
		if i == 2 && net.ParseIP(*c.name) == nil {
			return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "%s is not a valid IP or resolvable host.", *c.name)
		}
		e[i].name = *c.name
	}
	if e[2].set && (e[0].set || e[1].set) {
		return e, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid quota entity combination, IP entity should not be combined with User or ClientId")
	}
	return e, nil
}

type quotaComponent struct {
	typ  string
	name *string
}

// validateQuotaKey checks one key and value for an entity.
func validateQuotaKey(e quotaEntity, key string, value float64, remove bool) error {
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

// alterQuota applies ops to one entity, all or nothing, persisting the
// result before it is used.
func (b *Broker) alterQuota(comps []quotaComponent, ops []quotaOp, validateOnly bool) error {
	e, err := validateQuotaEntity(comps)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.key] {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Duplicate quota key %s", op.key)
		}
		seen[op.key] = true
		if err := validateQuotaKey(e, op.key, op.value, op.remove); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	q := b.quotas
	q.writeMu.Lock()
	defer q.writeMu.Unlock()
	q.cfgMu.RLock()
	next := map[string]float64{}
	for k, v := range q.configs[e] {
		next[k] = v
	}
	q.cfgMu.RUnlock()
	for _, op := range ops {
		if op.remove {
			delete(next, op.key)
		} else {
			next[op.key] = op.value
		}
	}
	key := []byte(meta.PrefixClientQuota + e.storeKey())
	if err := meta.PutJSONOrDelete(b.meta.DB(), key, next); err != nil {
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

type quotaOp struct {
	key    string
	value  float64
	remove bool
}

// quotaFilter is one DescribeClientQuotas component.
type quotaFilter struct {
	idx   int
	match int8 // 0 exact, 1 default, 2 any specified name
	name  *string
}

// describeQuotas lists the entities matching the filters (Kafka's
// ClientQuotasImage.describe rules).
func (b *Broker) describeQuotas(comps []quotaFilter, strict bool) []describedQuota {
	q := b.quotas
	q.cfgMu.RLock()
	defer q.cfgMu.RUnlock()
	var out []describedQuota
	for e, m := range q.configs {
		if !quotaMatches(e, comps, strict) {
			continue
		}
		vals := make(map[string]float64, len(m))
		for k, v := range m {
			vals[k] = v
		}
		out = append(out, describedQuota{e, vals})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].entity.storeKey() < out[j].entity.storeKey() })
	return out
}

type describedQuota struct {
	entity quotaEntity
	values map[string]float64
}

func quotaMatches(e quotaEntity, comps []quotaFilter, strict bool) bool {
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
func checkQuotaFilters(in []quotaFilterIn) ([]quotaFilter, error) {
	var out []quotaFilter
	var seen [3]bool
	for _, c := range in {
		if c.typ == "" {
			return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid empty entity type.")
		}
		i := quotaTypeIndex(c.typ)
		if i < 0 {
			return nil, kafkaerr.Refuse(kafkaerr.ErrQuotaEntityType, "Custom entity type %s not supported", c.typ)
		}
		if seen[i] {
			return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Entity type %s cannot appear more than once in the filter.", c.typ)
		}
		seen[i] = true
		switch c.match {
		case 0:
		case 1:
			if c.name != nil {
				return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string")
			}
		case 2:
			if c.name != nil {
				return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
		default:
			return nil, kafkaerr.Refuse(kafkaerr.ErrQuotaEntityType, "Unknown match type %d", c.match)
		}
		out = append(out, quotaFilter{idx: i, match: c.match, name: c.name})
	}
	if seen[2] && (seen[0] || seen[1]) {
		return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	return out, nil
}

type quotaFilterIn struct {
	typ   string
	match int8
	name  *string
}
