package raftnet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testCA is a CA that issues certificates for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert, key, pool}
}

func (ca *testCA) issue(t *testing.T, cn string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// peerTLS is the mutual TLS of a broker holding cert, trusting ca's
// certificates whose common name starts with "broker".
func peerTLS(ca *testCA, cert tls.Certificate) *TLSConfig {
	return &TLSConfig{
		Server: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.pool, ClientAuth: tls.RequireAndVerifyClientCert},
		Client: func(host string) *tls.Config {
			return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: ca.pool, ServerName: host}
		},
		Verify: func(cs tls.ConnectionState, node uint64) error {
			if cn := cs.PeerCertificates[0].Subject.CommonName; cn != fmt.Sprintf("broker-%d", node) {
				return errors.New("not broker " + fmt.Sprint(node) + ": " + cn)
			}
			return nil
		},
	}
}

// Peers with certificates of the cluster's CA exchange messages over
// mutual TLS; a node with a certificate of another CA, one whose
// certificate Verify refuses, and one speaking plaintext deliver
// nothing.
func TestTransportMutualTLS(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	certs := map[uint64]*TLSConfig{
		1: peerTLS(ca, ca.issue(t, "broker-1")),
		2: peerTLS(ca, ca.issue(t, "broker-2")),
		3: peerTLS(ca, other.issue(t, "broker-3")), // another CA: neither side trusts the other
		4: peerTLS(ca, ca.issue(t, "broker-2")),    // the CA's, but broker 2's: it cannot be node 4
	}
	certs[3].Client = func(host string) *tls.Config { // trusts the cluster's CA, shows its own
		c := certs[3].Server.Certificates
		return &tls.Config{Certificates: c, RootCAs: ca.pool, ServerName: host}
	}
	lns := map[uint64]net.Listener{}
	peers := map[uint64]string{}
	for id := uint64(1); id <= 5; id++ {
		lns[id] = listen(t)
		peers[id] = lns[id].Addr().String()
	}
	boxes := map[uint64]*inbox{}
	trs := map[uint64]*Transport{}
	for id := uint64(1); id <= 5; id++ {
		boxes[id] = &inbox{}
		tr, err := Start(Config{NodeID: id, ClusterID: "c1", Listener: lns[id], Peers: peers, Handler: boxes[id].handle,
			TLS: certs[id]}) // node 5: plaintext
		require.NoError(t, err)
		t.Cleanup(func() { _ = tr.Close() })
		trs[id] = tr
	}
	from := func(b *inbox, id string) bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, m := range b.got["g"] {
			if m[:len(id)+1] == id+":" {
				return true
			}
		}
		return false
	}
	require.True(t, trs[1].Send("g", 2, []byte("hello from 1")))
	require.True(t, trs[2].Send("g", 1, []byte("hello from 2")))
	require.Eventually(t, func() bool { return from(boxes[2], "1") && from(boxes[1], "2") }, 10*time.Second, 10*time.Millisecond)
	for id := uint64(3); id <= 5; id++ {
		trs[id].Send("g", 1, []byte("intruder"))
		trs[1].Send("g", id, []byte("to an outsider"))
	}
	time.Sleep(time.Second)
	for id := uint64(3); id <= 5; id++ {
		require.False(t, from(boxes[1], string(rune('0'+id))), "node 1 took a message from node %d", id)
		require.False(t, from(boxes[id], "1"), "node %d got node 1's message", id)
	}
}
