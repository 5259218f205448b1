package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// shoal.peer.security.protocol=SSL is checked at start: it needs the
// peer listener's keystore and super.users naming the brokers.
func TestPeerTLSSettingsAreChecked(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "broker-1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))

	cfg := func(sec map[string]string) *Config {
		c := DefaultConfig()
		c.ListenAddr, c.DataDir, c.NodeID, c.Voters = "127.0.0.1:0", t.TempDir(), 1, "1@127.0.0.1:19093"
		c.Security = sec
		return &c
	}
	for _, tc := range []struct {
		sec  map[string]string
		want string
	}{
		{map[string]string{"shoal.peer.security.protocol": "TLS"}, "shoal.peer.security.protocol"},
		{map[string]string{"shoal.peer.security.protocol": "SSL"}, "ssl.keystore.location"},
		{map[string]string{"shoal.peer.security.protocol": "ssl"}, "ssl.keystore.location"}, // any case, as the check accepts
		{map[string]string{"listener.name.peer.ssl.client.auth": "none"}, "always authenticate"},
		{map[string]string{"shoal.peer.security.protocol": "SSL", "listener.name.peer.ssl.keystore.certificate.chain": certPEM,
			"listener.name.peer.ssl.keystore.key": keyPEM}, "truststore"},
		{map[string]string{"shoal.peer.security.protocol": "SSL", "listener.name.peer.ssl.keystore.certificate.chain": certPEM,
			"listener.name.peer.ssl.keystore.key": keyPEM, "ssl.truststore.certificates": certPEM}, "super.users"},
	} {
		err := cfg(tc.sec).Validate()
		require.Error(t, err, "%v", tc.sec)
		require.Contains(t, err.Error(), tc.want)
	}
	noVoter := cfg(map[string]string{"shoal.peer.security.protocol": "SSL", "listener.name.peer.ssl.keystore.certificate.chain": certPEM,
		"listener.name.peer.ssl.keystore.key": keyPEM, "ssl.truststore.certificates": certPEM, "shoal.peer.principals": "2=User:CN=broker-2"})
	require.ErrorContains(t, noVoter.Validate(), "no principal for voter 1")
	require.ErrorContains(t, cfg(map[string]string{"shoal.peer.principals": "1=broker"}).Validate(), "node-id=Type:name")
	byNode := cfg(map[string]string{"shoal.peer.security.protocol": "SSL", "listener.name.peer.ssl.keystore.certificate.chain": certPEM,
		"listener.name.peer.ssl.keystore.key": keyPEM, "ssl.truststore.certificates": certPEM, "shoal.peer.principals": "1=User:CN=broker-1"})
	require.NoError(t, byNode.Validate()) // super.users not needed then
	ok := cfg(map[string]string{"shoal.peer.security.protocol": "SSL", "listener.name.peer.ssl.keystore.certificate.chain": certPEM,
		"listener.name.peer.ssl.keystore.key": keyPEM, "ssl.truststore.certificates": certPEM, "super.users": "User:CN=broker-1"})
	require.NoError(t, ok.Validate())
	// On a single node the setting has nothing to secure.
	single := cfg(map[string]string{"shoal.peer.security.protocol": "SSL"})
	single.Voters, single.NodeID = "", 0
	require.NoError(t, single.Validate())
}
