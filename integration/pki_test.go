package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// testCA is a certificate authority made by a test (crypto/x509; nothing
// is checked in).
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serials atomic.Int64 // parallel tests issue certificates at once

func nextSerial() *big.Int { return big.NewInt(1000 + serials.Add(1)) }

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issued is a key and certificate signed by a testCA.
type issued struct {
	certPEM, keyPEM []byte
	cert            *x509.Certificate
}

// issue signs a certificate for subject: a server one (for 127.0.0.1)
// or a client one.
func (ca *testCA) issue(t *testing.T, subject pkix.Name, server bool) issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	return ca.sign(t, tmpl, key)
}

// sign issues tmpl's certificate for key.
func (ca *testCA) sign(t *testing.T, tmpl *x509.Certificate, key *ecdsa.PrivateKey) issued {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return issued{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		cert:    cert,
	}
}

// tlsCert is the pair as crypto/tls wants it.
func (i issued) tlsCert(t *testing.T) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(i.certPEM, i.keyPEM)
	require.NoError(t, err)
	return c
}

// writeFiles writes the pair into dir as name.crt and name.key and a
// keystore name.pem holding both (Kafka's PEM keystore), returning
// their paths.
func (i issued) writeFiles(t *testing.T, dir, name string) (crt, key, keystore string) {
	t.Helper()
	crt, key, keystore = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pem")
	require.NoError(t, os.WriteFile(crt, i.certPEM, 0o600))
	require.NoError(t, os.WriteFile(key, i.keyPEM, 0o600))
	require.NoError(t, os.WriteFile(keystore, append(append([]byte{}, i.keyPEM...), i.certPEM...), 0o600))
	return crt, key, keystore
}

// clientTLS is a client config trusting ca, presenting certs.
func clientTLS(ca *testCA, certs ...tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &tls.Config{RootCAs: pool, Certificates: certs, ServerName: "127.0.0.1"}
}

// failureLogger is a broker logger whose last 100 lines the test
// prints if it fails.
func failureLogger(t *testing.T) *zap.Logger {
	logs := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker log (last 100 lines):\n%s", tailLines(logs.String(), 100))
		}
	})
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(logs), testLogLevel()))
}
