package security

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/xdg-go/scram"
	"github.com/xdg-go/stringprep"

	"github.com/shoal-mq/shoal/broker/meta"
)

// SCRAM mechanisms, with their numbers in the SCRAM credential APIs
// (DescribeUserScramCredentials, AlterUserScramCredentials).
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	Plain       = "PLAIN"
)

// ScramMechanisms are the SCRAM mechanisms by API number.
var ScramMechanisms = map[int8]string{1: ScramSHA256, 2: ScramSHA512}

// ScramMechanismNumber is the API number of a SCRAM mechanism.
func ScramMechanismNumber(mech string) int8 {
	for n, m := range ScramMechanisms {
		if m == mech {
			return n
		}
	}
	return 0
}

// Iteration bounds of a stored SCRAM credential: Kafka's minimum (4096,
// RFC 7677's recommendation) and KRaft's maximum (16384).
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

// ErrIterations is an iteration count outside the bounds.
var ErrIterations = fmt.Errorf("iterations must be between %d and %d", MinScramIterations, MaxScramIterations)

func scramHash(mech string) (func() hash.Hash, scram.HashGeneratorFcn, bool) {
	switch mech {
	case ScramSHA256:
		return sha256.New, scram.SHA256, true
	case ScramSHA512:
		return sha512.New, scram.SHA512, true
	}
	return nil, nil, false
}

// scramRecord is one stored credential (meta/scram/<mech>/<user>): the
// salt, the iterations and the two keys RFC 5802 derives from the
// salted password, never the password or the salted password.
type scramRecord struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// Credentials are the SCRAM credentials, in memory and in the metadata
// store. Writes are durable before they return.
type Credentials struct {
	store *meta.Store
	// writeMu serializes writers across their durable commit; mu is
	// taken only to read or update the map, so logins never wait for
	// an fsync.
	writeMu sync.Mutex
	// fakeKey makes an unknown user's conversation look like a known
	// user's (a salt derived from the name), so that it fails where a
	// wrong password fails, with the same answer.
	fakeKey []byte
	mu      struct {
		sync.RWMutex
		m map[string]map[string]scramRecord // mechanism → user → record
	}
}

func scramKey(mech, user string) []byte {
	return []byte(meta.PrefixScram + mech + "/" + url.PathEscape(user))
}

// LoadCredentials reads every stored credential.
func LoadCredentials(store *meta.Store) (*Credentials, error) {
	c := &Credentials{store: store}
	c.mu.m = map[string]map[string]scramRecord{}
	// The key behind unknown users' made-up salts is kept, so that an
	// unknown user's salt is as stable across restarts as a real one's.
	key, err := meta.GetOrCreate(store.DB(), []byte(meta.KeyScramFake), func() []byte {
		k := make([]byte, 32)
		rand.Read(k)
		return k
	})
	if err != nil {
		return nil, err
	}
	c.fakeKey = key
	err = meta.ScanJSON(store.DB(), meta.PrefixScram, func(name string, r scramRecord) error {
		mech, esc, ok := strings.Cut(name, "/")
		user, err := url.PathUnescape(esc)
		if _, _, known := scramHash(mech); !ok || err != nil || !known {
			return fmt.Errorf("security: bad SCRAM credential key %q", name)
		}
		if c.mu.m[mech] == nil {
			c.mu.m[mech] = map[string]scramRecord{}
		}
		c.mu.m[mech][user] = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// deriveRecord computes the stored record from a salted password. The
// salt is copied: a request's byte fields alias the connection's frame
// buffer, which the next request overwrites.
func deriveRecord(mech string, salt, salted []byte, iterations int) scramRecord {
	h, _, _ := scramHash(mech)
	return scramRecord{Salt: bytes.Clone(salt), Iterations: iterations,
		StoredKey: hashOf(h, hmacOf(h, salted, "Client Key")), ServerKey: hmacOf(h, salted, "Server Key")}
}

// hmacOf is RFC 5802's HMAC(key, s); hashOf its H(b).
func hmacOf(h func() hash.Hash, key []byte, s string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

func hashOf(h func() hash.Hash, b []byte) []byte {
	sum := h()
	sum.Write(b)
	return sum.Sum(nil)
}

// SaltedPassword is RFC 5802's Hi(password, salt, i) over the
// password's UTF-8 bytes, as Kafka's ScramFormatter, librdkafka and the
// Java client compute it (RFC 5802's SASLprep is an identity on ASCII;
// franz-go applies it, so a non-ASCII password may differ between
// clients, as with Kafka).
func SaltedPassword(mech, password string, salt []byte, iterations int) ([]byte, error) {
	h, _, ok := scramHash(mech)
	if !ok {
		return nil, fmt.Errorf("unknown SCRAM mechanism %q", mech)
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// Change is one credential change of AlterUserScramCredentials: a
// deletion, or an upsert from a salted password.
type Change struct {
	Mechanism, User string
	Delete          bool
	Salt, Salted    []byte
	Iterations      int
}

// ErrNoCredential is a deletion of a credential that does not exist.
var ErrNoCredential = errors.New("no such credential")

// Apply makes changes all at once, durably, or none of them.
func (c *Credentials) Apply(changes []Change) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	ops := make([]meta.Op, 0, len(changes))
	recs := make([]scramRecord, len(changes))
	for i, ch := range changes {
		if _, _, ok := scramHash(ch.Mechanism); !ok {
			return fmt.Errorf("unknown SCRAM mechanism %q", ch.Mechanism)
		}
		if ch.User == "" {
			return errors.New("empty user name")
		}
		if ch.Delete {
			c.mu.RLock()
			_, ok := c.mu.m[ch.Mechanism][ch.User]
			c.mu.RUnlock()
			if !ok {
				return ErrNoCredential
			}
			ops = append(ops, meta.Op{Key: scramKey(ch.Mechanism, ch.User), Del: true})
			continue
		}
		if ch.Iterations < MinScramIterations || ch.Iterations > MaxScramIterations {
			return ErrIterations
		}
		if len(ch.Salt) == 0 || len(ch.Salted) == 0 {
			return errors.New("empty salt or salted password")
		}
		recs[i] = deriveRecord(ch.Mechanism, ch.Salt, ch.Salted, ch.Iterations)
		v, err := json.Marshal(recs[i])
		if err != nil {
			return err
		}
		ops = append(ops, meta.Op{Key: scramKey(ch.Mechanism, ch.User), Value: v})
	}
	if err := c.store.Committer().Write(ops...); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ch := range changes {
		if ch.Delete {
			delete(c.mu.m[ch.Mechanism], ch.User)
			continue
		}
		if c.mu.m[ch.Mechanism] == nil {
			c.mu.m[ch.Mechanism] = map[string]scramRecord{}
		}
		c.mu.m[ch.Mechanism][ch.User] = recs[i]
	}
	return nil
}

// Upsert stores one credential from its salted password (durable first).
func (c *Credentials) Upsert(mech, user string, salt, salted []byte, iterations int) error {
	return c.Apply([]Change{{Mechanism: mech, User: user, Salt: salt, Salted: salted, Iterations: iterations}})
}

// Delete removes a credential (durable first); false if there is none.
func (c *Credentials) Delete(mech, user string) (bool, error) {
	err := c.Apply([]Change{{Mechanism: mech, User: user, Delete: true}})
	if errors.Is(err, ErrNoCredential) {
		return false, nil
	}
	return err == nil, err
}

// Info is one stored credential as DescribeUserScramCredentials shows it.
type Info struct {
	Mechanism  string
	Iterations int
}

// Describe returns user's credentials, by mechanism.
func (c *Credentials) Describe(user string) []Info {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Info
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		if r, ok := c.mu.m[mech][user]; ok {
			out = append(out, Info{mech, r.Iterations})
		}
	}
	return out
}

// Users returns every user with a credential, sorted.
func (c *Credentials) Users() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	seen := map[string]bool{}
	var out []string
	for _, m := range c.mu.m {
		for u := range m {
			if !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	sort.Strings(out)
	return out
}

// lookup returns the library's view of user's credential; an unknown
// user gets a made-up one no password matches, with a salt stable for
// the name (so probing cannot tell unknown users from known ones).
func (c *Credentials) lookup(mech, user string) scram.StoredCredentials {
	c.mu.RLock()
	r, ok := c.mu.m[mech][user]
	c.mu.RUnlock()
	if !ok {
		h, _, _ := scramHash(mech)
		sum := hmacOf(h, c.fakeKey, mech+"\x00"+user)
		// A 32-byte salt, as `shoal scram add` and kadm make them, and
		// a random-looking StoredKey no client proof can match.
		salt := sum
		if len(salt) > 32 {
			salt = salt[:32]
		}
		r = scramRecord{Salt: salt, Iterations: MinScramIterations, StoredKey: sum, ServerKey: sum}
	}
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(r.Salt), Iters: r.Iterations},
		StoredKey:  r.StoredKey, ServerKey: r.ServerKey,
	}
}

// plainChecks bounds the PBKDF2 work of PLAIN checks running at once:
// an unauthenticated client cannot make the broker spend more than
// that many cores on password guesses.
var plainChecks = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// CheckPlain checks a PLAIN password against user's stored SCRAM
// credential (SHA-256 first, else SHA-512), in constant time: the
// password as given (Kafka's form), then SASLprep'd (franz-go's, when
// it differs). An unknown user costs the same key derivation as a
// known one with 4096 iterations.
func (c *Credentials) CheckPlain(user, password string) bool {
	plainChecks <- struct{}{}
	defer func() { <-plainChecks }()
	candidates := []string{password}
	if p, err := stringprep.SASLprep.Prepare(password); err == nil && p != password {
		candidates = append(candidates, p)
	}
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		c.mu.RLock()
		r, ok := c.mu.m[mech][user]
		c.mu.RUnlock()
		if !ok {
			continue
		}
		match := false
		for _, pw := range candidates {
			salted, err := SaltedPassword(mech, pw, r.Salt, r.Iterations)
			if err != nil {
				return false
			}
			got := deriveRecord(mech, r.Salt, salted, r.Iterations)
			if hmac.Equal(got.StoredKey, r.StoredKey) {
				match = true
			}
		}
		return match
	}
	fake := c.lookup(ScramSHA256, user)
	salted, _ := SaltedPassword(ScramSHA256, password, []byte(fake.Salt), fake.Iters)
	got := deriveRecord(ScramSHA256, []byte(fake.Salt), salted, fake.Iters)
	hmac.Equal(got.StoredKey, fake.StoredKey) // the same work as a known user's check
	return false
}
