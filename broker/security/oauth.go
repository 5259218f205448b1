package security

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
)

// OAuthBearer is OAUTHBEARER (RFC 7628, KIP-255) with Kafka's
// production validator (KIP-768): a JWT signed by a key of the JWKS at
// sasl.oauthbearer.jwks.endpoint.url (a file, or an https URL fetched
// again every sasl.oauthbearer.jwks.endpoint.refresh.ms and when a
// token names an unknown key), with exp required, exp and nbf checked
// with sasl.oauthbearer.clock.skew.seconds, the audience and issuer if
// configured, and the principal from sasl.oauthbearer.sub.claim.name.
// Unsigned tokens (alg none) pass only with
// shoal.sasl.oauthbearer.unsecured.enable=true, as Kafka's development
// validator.
type OAuthBearer struct {
	source    string // file path or URL
	isURL     bool
	refresh   time.Duration
	skew      time.Duration
	audience  []string
	issuer    string
	subClaim  string
	unsecured bool
	warn      func(string, error)

	mu struct {
		sync.Mutex
		kf        keyfunc.Keyfunc
		stamp     fileStamp
		fetchedAt time.Time
		// lastTry is the last fetch or file check that failed (errors
		// are retried and reported at most every 10 s); lastForced the
		// last fetch for an unknown key id (at most one every 10 s, so
		// tokens with made-up kids cannot make the broker hammer the
		// endpoint).
		lastTry, lastForced time.Time
		// inflight is closed when the fetch running now ends; no lock
		// is held during a fetch.
		inflight chan struct{}
	}
}

// jwksClient fetches https JWKS (tests replace it to trust their
// server). It follows no redirect off https.
var jwksClient = &http.Client{
	Timeout: 10 * time.Second,
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" || len(via) > 3 {
			return fmt.Errorf("JWKS redirect to %s refused", req.URL.Redacted())
		}
		return nil
	},
}

// CheckOAuthBearer checks listener's OAUTHBEARER settings without
// reading the JWKS (config validation does no I/O).
func CheckOAuthBearer(s Settings, listener string) error {
	_, err := oauthConfig(s, listener)
	return err
}

func oauthConfig(s Settings, listener string) (*OAuthBearer, error) {
	get := func(k string) string { return s.For(listener, k) }
	o := &OAuthBearer{
		source:    get("sasl.oauthbearer.jwks.endpoint.url"),
		refresh:   time.Duration(s.Millis(listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms")) * time.Millisecond,
		skew:      time.Duration(s.Millis(listener, "sasl.oauthbearer.clock.skew.seconds")) * time.Second,
		issuer:    get("sasl.oauthbearer.expected.issuer"),
		subClaim:  get("sasl.oauthbearer.sub.claim.name"),
		unsecured: strings.EqualFold(get("shoal.sasl.oauthbearer.unsecured.enable"), "true"),
	}
	for _, a := range strings.Split(get("sasl.oauthbearer.expected.audience"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			o.audience = append(o.audience, a)
		}
	}
	switch {
	case o.source != "" && o.unsecured:
		// As in Kafka, the unsecured validator is another validator, not
		// an addition: with both, an unsigned token would pass for any
		// principal on a listener meant to check signatures.
		return nil, fmt.Errorf("listener %s: shoal.sasl.oauthbearer.unsecured.enable and sasl.oauthbearer.jwks.endpoint.url exclude each other", listener)
	case o.source == "" && !o.unsecured:
		return nil, fmt.Errorf("listener %s: OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (or shoal.sasl.oauthbearer.unsecured.enable=true for development)", listener)
	case o.source == "":
		return o, nil
	}
	u, err := url.Parse(o.source)
	if err != nil {
		return nil, fmt.Errorf("listener %s: sasl.oauthbearer.jwks.endpoint.url: %w", listener, err)
	}
	switch u.Scheme {
	case "":
		// A file path.
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("listener %s: sasl.oauthbearer.jwks.endpoint.url %q: a file URL names no host (file:///path)", listener, o.source)
		}
		o.source = u.Path
	case "https":
		o.isURL = true
	default:
		// Keys over plain HTTP can be swapped by anyone on the path.
		return nil, fmt.Errorf("listener %s: sasl.oauthbearer.jwks.endpoint.url must be https or a file, not %q", listener, o.source)
	}
	return o, nil
}

// NewOAuthBearer builds listener's validator from its settings and
// reads its JWKS. warn reports failed refreshes (at most every 10 s).
func NewOAuthBearer(s Settings, listener string, warn func(string, error)) (*OAuthBearer, error) {
	o, err := oauthConfig(s, listener)
	if err != nil {
		return nil, err
	}
	o.warn = warn
	if o.source == "" {
		return o, nil
	}
	var kf keyfunc.Keyfunc
	if o.isURL {
		kf, err = o.fetch()
	} else {
		o.mu.Lock()
		err = o.loadFileLocked()
		kf = o.mu.kf
		o.mu.Unlock()
	}
	if err != nil {
		return nil, fmt.Errorf("listener %s: JWKS: %w", listener, err)
	}
	o.mu.kf, o.mu.fetchedAt = kf, time.Now()
	return o, nil
}

// parseJWKS makes a key function of a JWKS that takes only signing
// keys (use "sig" or no use), as Kafka's verification key selector.
func parseJWKS(raw []byte) (keyfunc.Keyfunc, error) {
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, err
	}
	st, err := set.ToStorage()
	if err != nil {
		return nil, err
	}
	return keyfunc.New(keyfunc.Options{Storage: st, UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
}

// fetch GETs the https JWKS (no lock held).
func (o *OAuthBearer) fetch() (keyfunc.Keyfunc, error) {
	resp, err := jwksClient.Get(o.source)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", o.source, resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	return parseJWKS(raw)
}

// loadFileLocked reads the JWKS file again if it changed.
func (o *OAuthBearer) loadFileLocked() error {
	st, err := stamp(o.source)
	if err == nil && st == o.mu.stamp && o.mu.kf != nil {
		return nil
	}
	var raw []byte
	if err == nil {
		raw, err = os.ReadFile(o.source)
	}
	var kf keyfunc.Keyfunc
	if err == nil {
		kf, err = parseJWKS(raw)
	}
	if err != nil {
		return err
	}
	o.mu.kf, o.mu.stamp = kf, st
	return nil
}

// startFetchLocked starts a fetch unless one runs and returns the
// channel closed when it ends.
func (o *OAuthBearer) startFetchLocked() chan struct{} {
	if o.mu.inflight != nil {
		return o.mu.inflight
	}
	done := make(chan struct{})
	o.mu.inflight = done
	go func() {
		kf, err := o.fetch()
		o.mu.Lock()
		if err == nil {
			o.mu.kf, o.mu.fetchedAt = kf, time.Now()
		} else {
			o.mu.lastTry = time.Now()
		}
		o.mu.inflight = nil
		o.mu.Unlock()
		close(done)
		if err != nil && o.warn != nil {
			o.warn("OAUTHBEARER JWKS refresh failed; using the last keys", err)
		}
	}()
	return done
}

// keys returns the current key function. A due https refresh runs in
// the background (the last keys answer meanwhile); force, for an
// unknown key id, waits for a fetch (at most one every 10 s). A file
// is checked at each call, a failing one at most every 10 s.
func (o *OAuthBearer) keys(force bool) keyfunc.Keyfunc {
	o.mu.Lock()
	var wait chan struct{}
	var err error
	switch {
	case o.source == "":
	case !o.isURL:
		if time.Since(o.mu.lastTry) > 10*time.Second {
			if err = o.loadFileLocked(); err != nil {
				o.mu.lastTry = time.Now()
			}
		}
	case force && time.Since(o.mu.lastForced) > 10*time.Second:
		o.mu.lastForced = time.Now()
		wait = o.startFetchLocked()
	case time.Since(o.mu.fetchedAt) > o.refresh && time.Since(o.mu.lastTry) > 10*time.Second:
		o.startFetchLocked()
	}
	kf := o.mu.kf
	o.mu.Unlock()
	if err != nil && o.warn != nil {
		o.warn("OAUTHBEARER JWKS file does not load; using the last keys", err)
	}
	if wait != nil {
		<-wait
		o.mu.Lock()
		kf = o.mu.kf
		o.mu.Unlock()
	}
	return kf
}

// validate checks a token and returns its principal name and expiry.
func (o *OAuthBearer) validate(token string) (string, time.Time, error) {
	opts := []jwt.ParserOption{jwt.WithLeeway(o.skew), jwt.WithExpirationRequired()}
	claims := jwt.MapClaims{}
	var err error
	if parts := strings.Split(token, "."); o.unsecured && len(parts) == 3 && isNoneAlg(parts[0]) {
		// Kafka's unsecured validator checks exp and the subject only
		// (librdkafka's built-in unsecured tokens carry no aud or iss).
		_, err = jwt.NewParser(append(opts, jwt.WithValidMethods([]string{"none"}))...).ParseWithClaims(token, claims,
			func(*jwt.Token) (any, error) { return jwt.UnsafeAllowNoneSignatureType, nil })
	} else {
		if o.issuer != "" {
			opts = append(opts, jwt.WithIssuer(o.issuer))
		}
		if len(o.audience) > 0 {
			opts = append(opts, jwt.WithAudience(o.audience...))
		}
		kf := o.keys(false)
		if kf == nil {
			return "", time.Time{}, errors.New("no JWKS configured")
		}
		p := jwt.NewParser(append(opts, jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}))...)
		_, err = p.ParseWithClaims(token, claims, kf.Keyfunc)
		if err != nil && errors.Is(err, keyfunc.ErrKeyfunc) && o.isURL {
			// An unknown key id: the keys may have rotated.
			claims = jwt.MapClaims{}
			_, err = p.ParseWithClaims(token, claims, o.keys(true).Keyfunc)
		}
	}
	if err != nil {
		return "", time.Time{}, err
	}
	sub, _ := claims[o.subClaim].(string)
	if sub == "" {
		return "", time.Time{}, fmt.Errorf("no %q claim", o.subClaim)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return "", time.Time{}, errors.New("no exp claim")
	}
	return sub, exp.Time, nil
}

func isNoneAlg(header string) bool {
	raw, err := jwt.NewParser().DecodeSegment(header)
	if err != nil {
		return false
	}
	var h map[string]any
	return json.Unmarshal(raw, &h) == nil && h["alg"] == "none" // exactly as jwt routes it
}

// oauthExchange is one OAUTHBEARER authentication: the client's
// initial response, then, after a refusal, the client's %x01.
type oauthExchange struct {
	o       *OAuthBearer
	user    string
	expires time.Time
	failed  bool
	reason  error // why the token was refused
}

// Refusal is why the token was refused (nil if it was not), for the
// broker's log: the client only sees invalid_token.
func (e *oauthExchange) Refusal() error { return e.reason }

// Step reads RFC 7628's initial response: gs2-header %x01 auth=Bearer
// token %x01 [key=value %x01]* %x01. A refused token is answered with
// Kafka's {"status":"invalid_token"} challenge; the client's %x01 that
// follows ends the exchange with the failure.
func (e *oauthExchange) Step(in []byte) ([]byte, bool, error) {
	if e.failed { // the client's %x01 after the refusal
		return nil, false, fmt.Errorf("%w: %s", ErrAuthFailed, `{"status":"invalid_token"}`)
	}
	token, authz, ok := parseOAuthMessage(in)
	if !ok {
		return nil, false, ErrAuthFailed
	}
	user, exp, err := e.o.validate(token)
	if err == nil && authz != "" && authz != user {
		err = fmt.Errorf("authorization id %q is not the token's subject", authz)
	}
	if err != nil {
		e.failed, e.reason = true, err
		return []byte(`{"status":"invalid_token"}`), false, nil
	}
	e.user, e.expires = user, exp
	return nil, true, nil
}

func (e *oauthExchange) User() string { return e.user }

// Expires is when the token ends; the session ends no later (KIP-368).
func (e *oauthExchange) Expires() time.Time { return e.expires }

func parseOAuthMessage(in []byte) (token, authz string, ok bool) {
	gs2, rest, found := bytes.Cut(in, []byte{1})
	if !found {
		return "", "", false
	}
	h := strings.Split(string(gs2), ",")
	if len(h) < 2 || h[0] != "n" && h[0] != "y" {
		return "", "", false
	}
	if a, isA := strings.CutPrefix(h[1], "a="); isA {
		var valid bool
		if authz, valid = decodeSaslName(a); !valid {
			return "", "", false
		}
	} else if h[1] != "" {
		return "", "", false
	}
	if !bytes.HasSuffix(rest, []byte{1, 1}) {
		return "", "", false
	}
	for _, kv := range bytes.Split(rest[:len(rest)-2], []byte{1}) {
		k, v, _ := bytes.Cut(kv, []byte("="))
		if string(k) == "auth" {
			scheme, tok, ok := strings.Cut(string(v), " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
				return "", "", false
			}
			token = tok
		}
	}
	return token, authz, token != ""
}
