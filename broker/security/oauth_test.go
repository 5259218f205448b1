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
	"os"
	"strings"
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

// TestOAuthRefusals (review findings): the unsecured mode and a JWKS
// exclude each other; keys for encryption do not verify; HS256, "NONE"
// and unsigned tokens are refused; a redirect off https is not followed.
func TestOAuthRefusals(t *testing.T) {
	dir := t.TempDir()
	sig, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	enc, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	b64 := func(n *big.Int) string { return base64.RawURLEncoding.EncodeToString(n.FillBytes(make([]byte, 32))) }
	raw, _ := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "EC", "crv": "P-256", "kid": "sig", "use": "sig", "x": b64(sig.X), "y": b64(sig.Y)},
		{"kty": "EC", "crv": "P-256", "kid": "enc", "use": "enc", "x": b64(enc.X), "y": b64(enc.Y)},
	}})
	path := dir + "/jwks.json"
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	_, err := NewOAuthBearer(Settings{"sasl.oauthbearer.jwks.endpoint.url": path, "shoal.sasl.oauthbearer.unsecured.enable": "true"}, "L", nil)
	require.ErrorContains(t, err, "exclude each other")
	_, err = NewOAuthBearer(Settings{"sasl.oauthbearer.jwks.endpoint.url": "file://etc/jwks.json"}, "L", nil)
	require.ErrorContains(t, err, "names no host")

	o, err := NewOAuthBearer(Settings{"sasl.oauthbearer.jwks.endpoint.url": "file://" + path}, "L", nil)
	require.NoError(t, err)
	_, _, err = o.validate(signed(t, "sig", sig, "alice"))
	require.NoError(t, err)
	_, _, err = o.validate(signed(t, "enc", enc, "alice"))
	require.Error(t, err, "a use=enc key does not verify")
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "x", "exp": time.Now().Add(time.Hour).Unix()})
	hsTok, _ := hs.SignedString([]byte("secret"))
	_, _, err = o.validate(hsTok)
	require.Error(t, err, "HS256")
	none := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "x", "exp": time.Now().Add(time.Hour).Unix()})
	noneTok, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	_, _, err = o.validate(noneTok)
	require.Error(t, err, "unsigned without the development mode")
	upper := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"NONE","typ":"JWT"}`)) + noneTok[strings.Index(noneTok, "."):]
	dev, err := NewOAuthBearer(Settings{"shoal.sasl.oauthbearer.unsecured.enable": "true"}, "L", nil)
	require.NoError(t, err)
	_, _, err = dev.validate(upper)
	require.Error(t, err, "NONE is not none")
	_, _, err = dev.validate(noneTok)
	require.NoError(t, err)

	// A redirect from https to http is refused.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(raw) }))
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL, http.StatusFound)
	}))
	defer tlsSrv.Close()
	old := jwksClient
	c := *tlsSrv.Client()
	c.CheckRedirect = old.CheckRedirect
	jwksClient = &c
	defer func() { jwksClient = old }()
	_, err = NewOAuthBearer(Settings{"sasl.oauthbearer.jwks.endpoint.url": tlsSrv.URL}, "L", nil)
	require.ErrorContains(t, err, "redirect")
}
