package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

func jwksOf(t *testing.T, kid string, key *ecdsa.PrivateKey) []byte {
	b64 := func(n *big.Int) string { return base64.RawURLEncoding.EncodeToString(n.FillBytes(make([]byte, 32))) }
	raw, err := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "x": b64(key.X), "y": b64(key.Y)}}})
	require.NoError(t, err)
	return raw
}

func signed(t *testing.T, kid string, key *ecdsa.PrivateKey, sub string) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

// TestOAuthJWKSOverHTTPSRotates: an https JWKS is fetched at start; a
// token signed by a key published later (an unknown kid) makes one
// refresh, after which it is accepted; made-up kids do not make the
// broker fetch again and again.
func TestOAuthJWKSOverHTTPSRotates(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var current atomic.Value
	current.Store(jwksOf(t, "k1", k1))
	var fetches atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Write(current.Load().([]byte))
	}))
	defer srv.Close()
	old := jwksClient
	jwksClient = srv.Client()
	defer func() { jwksClient = old }()

	o, err := NewOAuthBearer(Settings{"sasl.oauthbearer.jwks.endpoint.url": srv.URL}, "L", nil)
	require.NoError(t, err)
	user, _, err := o.validate(signed(t, "k1", k1, "alice"))
	require.NoError(t, err)
	require.Equal(t, "alice", user)
	require.Equal(t, int32(1), fetches.Load())

	current.Store(jwksOf(t, "k2", k2))
	user, _, err = o.validate(signed(t, "k2", k2, "bob"))
	require.NoError(t, err, "the unknown kid made a refresh")
	require.Equal(t, "bob", user)
	require.Equal(t, int32(2), fetches.Load())
	for range 5 {
		_, _, err = o.validate(signed(t, "k9", k2, "mallory"))
		require.Error(t, err)
	}
	require.Equal(t, int32(2), fetches.Load(), "made-up kids fetch at most every 10 s")

	_, err = NewOAuthBearer(Settings{"sasl.oauthbearer.jwks.endpoint.url": "http://127.0.0.1:1/jwks"}, "L", nil)
	require.ErrorContains(t, err, "https or a file")
}

func TestParseOAuthMessage(t *testing.T) {
	tok, authz, ok := parseOAuthMessage([]byte("n,a=bob,\x01host=h\x01auth=Bearer abc.def.ghi\x01\x01"))
	require.True(t, ok)
	require.Equal(t, "abc.def.ghi", tok)
	require.Equal(t, "bob", authz)
	for _, bad := range []string{"", "n,,", "n,,\x01auth=Bearer x\x01", "n,,\x01auth=Basic x\x01\x01", "x,,\x01auth=Bearer x\x01\x01", "n,a=b=X,\x01auth=Bearer x\x01\x01", "n,,\x01\x01"} {
		_, _, ok := parseOAuthMessage([]byte(bad))
		require.False(t, ok, "%q", bad)
	}
}
