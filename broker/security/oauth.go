package security

import (
	"bytes"
	"context"
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
	client    *http.Client

	mu struct {
		sync.Mutex
		kf        keyfunc.Keyfunc
		stamp     fileStamp
		fetchedAt time.Time
		lastTry   time.Time
		// lastForced is the last refresh for an unknown key id: at most
		// one every 10 s, so tokens with made-up kids cannot make the
		// broker hammer the endpoint.
		lastForced time.Time
	}
}

// jwksClient fetches https JWKS (tests replace it to trust their server).
var jwksClient = &http.Client{Timeout: 10 * time.Second}

// NewOAuthBearer builds listener's validator from its settings.
func NewOAuthBearer(s Settings, listener string, warn func(string, error)) (*OAuthBearer, error) {
	get := func(k string) string { return s.For(listener, k) }
	o := &OAuthBearer{
		source:    get("sasl.oauthbearer.jwks.endpoint.url"),
		refresh:   time.Duration(s.Millis(listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms")) * time.Millisecond,
		skew:      time.Duration(s.Millis(listener, "sasl.oauthbearer.clock.skew.seconds")) * time.Second,
		issuer:    get("sasl.oauthbearer.expected.issuer"),
		subClaim:  get("sasl.oauthbearer.sub.claim.name"),
		unsecured: strings.EqualFold(get("shoal.sasl.oauthbearer.unsecured.enable"), "true"),
		warn:      warn,
		client:    jwksClient,
	}
	for _, a := range strings.Split(get("sasl.oauthbearer.expected.audience"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			o.audience = append(o.audience, a)
		}
	}
	switch {
	case o.source == "" && !o.unsecured:
		return nil, fmt.Errorf("listener %s: OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (or shoal.sasl.oauthbearer.unsecured.enable=true for development)", listener)
	case o.source == "":
		return o, nil
	}
	if u, err := url.Parse(o.source); err == nil && (u.Scheme == "https" || u.Scheme == "http" || u.Scheme == "file") {
		switch u.Scheme {
		case "file":
			o.source = u.Path
		case "http":
			// Keys over plain HTTP can be swapped by anyone on the path.
			return nil, fmt.Errorf("listener %s: sasl.oauthbearer.jwks.endpoint.url must be https or a file, not %q", listener, o.source)
		default:
			o.isURL = true
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.loadLocked(context.Background(), true); err != nil {
		return nil, fmt.Errorf("listener %s: JWKS: %w", listener, err)
	}
	return o, nil
}

// loadLocked (re)reads the JWKS if it is due (or force).
func (o *OAuthBearer) loadLocked(ctx context.Context, force bool) error {
	var raw []byte
	if o.isURL {
		if !force && time.Since(o.mu.fetchedAt) < o.refresh {
			return nil
		}
		if !force && time.Since(o.mu.lastTry) < 10*time.Second {
			return nil // a failing endpoint is not hammered
		}
		o.mu.lastTry = time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.source, nil)
		if err != nil {
			return err
		}
		resp, err := o.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", o.source, resp.Status)
		}
		if raw, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err != nil {
			return err
		}
	} else {
		st, err := stamp(o.source)
		if err != nil {
			return err
		}
		if !force && st == o.mu.stamp {
			return nil
		}
		if raw, err = os.ReadFile(o.source); err != nil {
			return err
		}
		o.mu.stamp = st
	}
	kf, err := keyfunc.NewJWKSetJSON(json.RawMessage(raw))
	if err != nil {
		return err
	}
	o.mu.kf, o.mu.fetchedAt = kf, time.Now()
	return nil
}

// keys returns the current key function, refreshing it if due; a
// failed refresh keeps the last good keys.
func (o *OAuthBearer) keys(force bool) keyfunc.Keyfunc {
	o.mu.Lock()
	var err error
	switch {
	case o.source == "":
	case force && o.isURL:
		if time.Since(o.mu.lastForced) > 10*time.Second {
			o.mu.lastForced = time.Now()
			err = o.loadLocked(context.Background(), true)
		}
	default:
		err = o.loadLocked(context.Background(), false)
	}
	kf := o.mu.kf
	o.mu.Unlock()
	if err != nil && o.warn != nil {
		o.warn("OAUTHBEARER JWKS refresh failed; using the last keys", err)
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
	var h struct {
		Alg string `json:"alg"`
	}
	return json.Unmarshal(raw, &h) == nil && strings.EqualFold(h.Alg, "none")
}

// oauthExchange is one OAUTHBEARER authentication: the client's
// initial response, then, after a refusal, the client's %x01.
type oauthExchange struct {
	o       *OAuthBearer
	user    string
	expires time.Time
	failed  bool
}

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
	if err != nil || authz != "" && authz != user {
		e.failed = true
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
