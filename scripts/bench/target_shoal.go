package main

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
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker"
)

// startShoal starts a Shoal broker in this process on a free port with its
// data in dir, fsyncing before acks as o.shoalFsync says.
func startShoal(o *options, dir string, logger *zap.Logger) ([]string, func() error, error) {
	cfg := broker.DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.Fsync = broker.FsyncPolicy(o.shoalFsync)
	cfg.Logger = logger
	// The bench creates its topics with CreateTopics; auto-creation with
	// the same partition count is the fallback when that is not served.
	cfg.DefaultPartitions = o.partitions
	b, err := broker.Start(cfg)
	if err != nil {
		return nil, nil, err
	}
	return []string{b.Addr()}, b.Close, nil
}

// startShoalSASLSSL starts Shoal with one SASL_SSL listener: a
// certificate made here (ECDSA P-256, TLS 1.3 negotiated by kgo), a
// SCRAM-SHA-512 user added before start (as `shoal scram add` does),
// and sets the clients' TLS and SASL options. Compared with startShoal
// it measures what TLS and authentication cost.
func startShoalSASLSSL(o *options, dir string, logger *zap.Logger) ([]string, func() error, error) {
	certPEM, keyPEM, pool, err := selfSigned()
	if err != nil {
		return nil, nil, err
	}
	keystore := filepath.Join(dir, "bench-broker.pem")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keystore, append(keyPEM, certPEM...), 0o600); err != nil {
		return nil, nil, err
	}
	const user, pass = "bench", "bench-secret"
	dataDir := filepath.Join(dir, "data")
	if err := broker.ScramAdd(dataDir, "SCRAM-SHA-512", user, pass, 4096); err != nil {
		return nil, nil, err
	}
	cfg := broker.DefaultConfig()
	cfg.Listeners = "SASL_SSL://127.0.0.1:0"
	cfg.Security = map[string]string{"ssl.keystore.location": keystore, "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
	cfg.DataDir = dataDir
	cfg.Fsync = broker.FsyncPolicy(o.shoalFsync)
	cfg.Logger = logger
	cfg.DefaultPartitions = o.partitions
	b, err := broker.Start(cfg)
	if err != nil {
		return nil, nil, err
	}
	o.clientOpts = []kgo.Opt{
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}),
		kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()),
	}
	return []string{b.Addr()}, b.Close, nil
}

// selfSigned makes a self-signed server certificate for 127.0.0.1.
func selfSigned() (certPEM, keyPEM []byte, pool *x509.CertPool, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shoal-bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), pool, nil
}
