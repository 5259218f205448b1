package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/shoal-mq/shoal/broker"
)

// testIssuer signs JWTs with an ECDSA key it publishes as a JWKS file.
type testIssuer struct {
	key  *ecdsa.PrivateKey
	kid  string
	jwks string // path
}

func newTestIssuer(t *testing.T, dir string) *testIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	is := &testIssuer{key: key, kid: "k1", jwks: filepath.Join(dir, "jwks.json")}
	b64 := func(n *big.Int) string { return base64.RawURLEncoding.EncodeToString(n.FillBytes(make([]byte, 32))) }
	set := map[string]any{"keys": []map[string]string{{"kty": "EC", "crv": "P-256", "kid": is.kid, "use": "sig", "alg": "ES256",
		"x": b64(key.X), "y": b64(key.Y)}}}
	raw, err := json.Marshal(set)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(is.jwks, raw, 0o600))
	return is
}

// token signs claims (sub, iss, aud, exp from now) with the key.
func (is *testIssuer) token(t *testing.T, sub, iss, aud string, exp time.Duration, extra map[string]any) string {
	t.Helper()
	c := jwt.MapClaims{"sub": sub, "iss": iss, "aud": aud, "exp": time.Now().Add(exp).Unix(), "iat": time.Now().Unix()}
	for k, v := range extra {
		c[k] = v
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	tok.Header["kid"] = is.kid
	s, err := tok.SignedString(is.key)
	require.NoError(t, err)
	return s
}

func oauthMech(token string) sasl.Mechanism {
	return oauth.Auth{Token: token}.AsMechanism()
}

func startOAuthBroker(t *testing.T, mut ...func(*broker.Config)) (*saslEnv, *testIssuer) {
	t.Helper()
	var is *testIssuer
	e := startSASLBroker(t, append([]func(*broker.Config){func(c *broker.Config) {
		is = newTestIssuer(t, filepath.Dir(c.DataDir))
		c.Security["listener.name.sasl_ssl.sasl.enabled.mechanisms"] = "SCRAM-SHA-512,OAUTHBEARER"
		c.Security["sasl.oauthbearer.jwks.endpoint.url"] = is.jwks
		c.Security["sasl.oauthbearer.expected.audience"] = "shoal"
		c.Security["sasl.oauthbearer.expected.issuer"] = "https://issuer.test"
		c.Security["sasl.oauthbearer.clock.skew.seconds"] = "5"
	}}, mut...)...)
	return e, is
}

// TestOAuthBearerKgo: franz-go authenticates with a JWT signed by a key
// of the JWKS and produces and consumes; expired, not yet valid,
// wrong-audience, wrong-issuer, unsigned and foreign-key tokens get
// SASL_AUTHENTICATION_FAILED (T14).
func TestOAuthBearerKgo(t *testing.T) {
	t.Parallel()
	e, is := startOAuthBroker(t)
	ctx := testContext(t)
	tc := clientTLS(e.ca)
	good := is.token(t, "svc-orders", "https://issuer.test", "shoal", time.Hour, nil)
	cl := e.client(t, e.saslS, tc, oauthMech(good), kgo.DefaultProduceTopic("oauth"), kgo.AllowAutoTopicCreation())
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr())
	cons := e.client(t, e.saslS, tc, oauthMech(good), kgo.ConsumeTopics("oauth"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	require.NoError(t, fs.Err())
	require.Equal(t, 1, fs.NumRecords())

	other := newTestIssuer(t, t.TempDir())
	none := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "x", "iss": "https://issuer.test", "aud": "shoal", "exp": time.Now().Add(time.Hour).Unix()})
	unsigned, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	for name, tok := range map[string]string{
		"expired":       is.token(t, "svc", "https://issuer.test", "shoal", -time.Minute, nil),
		"not yet valid": is.token(t, "svc", "https://issuer.test", "shoal", time.Hour, map[string]any{"nbf": time.Now().Add(time.Hour).Unix()}),
		"audience":      is.token(t, "svc", "https://issuer.test", "other", time.Hour, nil),
		"issuer":        is.token(t, "svc", "https://evil.test", "shoal", time.Hour, nil),
		"foreign key":   other.token(t, "svc", "https://issuer.test", "shoal", time.Hour, nil),
		"unsigned":      unsigned,
		"garbage":       "not.a.jwt",
	} {
		err := e.client(t, e.saslS, tc, oauthMech(tok)).Ping(ctx)
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, name)
		require.Contains(t, err.Error(), "invalid_token", name)
	}
	// Within the clock skew an expired token still passes.
	require.NoError(t, e.client(t, e.saslS, tc, oauthMech(is.token(t, "svc", "https://issuer.test", "shoal", -2*time.Second, nil))).Ping(ctx))
}

// TestOAuthBearerUnsecured: the development mode takes unsigned tokens;
// the session of a token ends with it when re-authentication is on.
func TestOAuthBearerUnsecured(t *testing.T) {
	t.Parallel()
	e, _ := startOAuthBroker(t, func(c *broker.Config) {
		c.Security["shoal.sasl.oauthbearer.unsecured.enable"] = "true"
		delete(c.Security, "sasl.oauthbearer.jwks.endpoint.url") // the two exclude each other
		c.Security["connections.max.reauth.ms"] = "600000"
	})
	none := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "dev", "iss": "https://issuer.test", "aud": "shoal", "exp": time.Now().Add(3 * time.Second).Unix()})
	unsigned, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	r := dialSASLRaw(t, e.saslS)
	r.nc = tlsClient(r.nc, e)
	require.Zero(t, r.handshake("OAUTHBEARER").ErrorCode)
	resp, err := r.authenticate([]byte("n,,\x01auth=Bearer " + unsigned + "\x01\x01"))
	require.NoError(t, err)
	require.Zero(t, resp.ErrorCode)
	require.InDelta(t, 3000, resp.SessionLifetimeMillis, 1500, "the token's exp, not connections.max.reauth.ms")
	_, err = r.do(metadataReq())
	require.NoError(t, err)
	// An authorization id other than the token's subject is refused.
	r = dialSASLRaw(t, e.saslS)
	r.nc = tlsClient(r.nc, e)
	require.Zero(t, r.handshake("OAUTHBEARER").ErrorCode)
	resp, err = r.authenticate([]byte("n,a=admin,\x01auth=Bearer " + unsigned + "\x01\x01"))
	require.NoError(t, err)
	require.Equal(t, `{"status":"invalid_token"}`, string(resp.SASLAuthBytes))
	resp, err = r.authenticate([]byte{1})
	require.NoError(t, err)
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
}

// TestKcatOAuthBearerUnsecured: librdkafka (kcat) authenticates with
// OAUTHBEARER using its built-in unsecured token (sasl.oauthbearer.config),
// accepted in the development mode, and is refused without it. Debian's
// librdkafka is built without libcurl, so its OIDC flow, which would
// fetch a signed token, is not available to test here (the signed path
// is covered by franz-go above).
func TestKcatOAuthBearerUnsecured(t *testing.T) {
	t.Parallel()
	kcat := requireTool(t, "kcat")
	ctx := testContext(t)
	for _, unsecured := range []bool{true, false} {
		e, _ := startOAuthBroker(t, func(c *broker.Config) {
			if unsecured {
				c.Security["shoal.sasl.oauthbearer.unsecured.enable"] = "true"
				delete(c.Security, "sasl.oauthbearer.jwks.endpoint.url")
			}
		})
		caFile := filepath.Join(e.dir, "ca.pem")
		args := []string{"-b", e.saslS, "-X", "security.protocol=sasl_ssl", "-X", "ssl.ca.location=" + caFile,
			"-X", "sasl.mechanisms=OAUTHBEARER", "-X", "sasl.oauthbearer.config=principal=kcat-dev lifeSeconds=600",
			"-X", "enable.sasl.oauthbearer.unsecure.jwt=true"}
		if !unsecured {
			cctx, cancel := contextWithTimeout(ctx, 15*time.Second)
			out, err := runErr(cctx, kcat, append(args, "-L", "-m", "5")...)
			cancel()
			require.Error(t, err, "an unsigned token without the development mode:\n%s", out)
			continue
		}
		run(t, ctx, "one\ntwo\n", kcat, append(args, "-t", "kcat-oauth", "-P")...)
		out := run(t, ctx, "", kcat, append(args, "-t", "kcat-oauth", "-C", "-o", "beginning", "-e", "-q")...)
		require.Equal(t, "one\ntwo\n", out)
	}
}

func tlsClient(nc net.Conn, e *saslEnv) net.Conn { return tls.Client(nc, clientTLS(e.ca)) }
