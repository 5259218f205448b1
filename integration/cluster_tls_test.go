package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// issuePeer signs a broker's peer certificate: for 127.0.0.1, good for
// both ends of a mutual TLS connection.
func (ca *testCA) issuePeer(t *testing.T, cn string) issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	return ca.sign(t, tmpl, key)
}

// TestClusterPeerTLS: three broker processes whose peer (raft) network
// is mutual TLS (shoal.peer.security.protocol=SSL, each broker's own
// certificate in listener.name.peer.ssl.keystore.location, the CA in
// ssl.truststore.location, each node's principal in
// shoal.peer.principals)
// replicate a topic: records produced with acks=all to the RF 3 topic
// are read back. A plaintext hello, a certificate of another CA and a
// certificate of the cluster's CA whose principal is not a broker are
// all refused at the peer port.
func TestClusterPeerTLS(t *testing.T) {
	if len(externalSeeds()) > 0 {
		t.Skipf("runs its own shoal binaries; %s is set", seedsEnv)
	}
	ca, other := newTestCA(t, "peer CA"), newTestCA(t, "another CA")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.pem, 0o600))
	children := newCluster(t, 3, nil)
	var supers, principals []string
	for _, c := range children {
		supers = append(supers, fmt.Sprintf("User:CN=broker-%d", c.id))
		principals = append(principals, fmt.Sprintf("%d=User:CN=broker-%d", c.id, c.id))
	}
	for _, c := range children {
		_, _, keystore := ca.issuePeer(t, fmt.Sprintf("broker-%d", c.id)).writeFiles(t, dir, fmt.Sprintf("broker-%d", c.id))
		props := filepath.Join(dir, fmt.Sprintf("broker-%d.properties", c.id))
		require.NoError(t, os.WriteFile(props, []byte(strings.Join([]string{
			"shoal.peer.security.protocol=SSL",
			"listener.name.peer.ssl.keystore.location=" + keystore,
			"listener.name.peer.ssl.truststore.location=" + caFile,
			"super.users=" + strings.Join(supers, ";"),
			"shoal.peer.principals=" + strings.Join(principals, ","), // each node its own certificate
		}, "\n")+"\n"), 0o600))
		c.extra = []string{"--config", props}
		c.start()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seeds := seedsOf(children)
	adm := kadm.NewClient(newClusterClient(t, seeds))
	topic := "peer-tls"
	createClusterTopic(t, ctx, adm, topic, 2, 3)
	prod := newClusterClient(t, seeds, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	var rs []*kgo.Record
	for i := range 500 {
		rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	require.NoError(t, prod.ProduceSync(ctx, rs...).FirstErr())
	cons := newClusterClient(t, seeds, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < len(rs) {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", got, len(rs))
		got += fs.NumRecords()
	}

	// Intruders at broker 1's peer port.
	peer := children[0].peer
	raw, err := net.Dial("tcp", peer)
	require.NoError(t, err)
	_, _ = raw.Write([]byte("SHRN\x01\x00\x00"))
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = raw.Read(make([]byte, 1))
	require.Error(t, err, "a plaintext hello was answered")
	_ = raw.Close()
	for _, cert := range []issued{other.issuePeer(t, "broker-1"), ca.issuePeer(t, "intruder")} {
		conn, err := tls.Dial("tcp", peer, &tls.Config{Certificates: []tls.Certificate{cert.tlsCert(t)}, RootCAs: clientTLS(ca).RootCAs, ServerName: "127.0.0.1"})
		if err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Read(make([]byte, 1)) // the server closes after checking the certificate
			_ = conn.Close()
		}
		require.Error(t, err)
	}
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(children[0].logf)
		log := string(b)
		return strings.Contains(log, `"peer_tls": true`) && strings.Count(log, "refused peer connection") >= 3
	}, 10*time.Second, 100*time.Millisecond, "broker 1 did not log the refusals")
}
