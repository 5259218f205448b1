package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker"
)

// tlsEnv is a broker with three listeners, PLAINTEXT, SSL (server
// certificate only) and MTLS (SSL requiring a client certificate, its
// principal mapped from the subject), and the PKI the test made.
type tlsEnv struct {
	b                *broker.Broker
	dir              string
	ca, otherCA      *testCA
	keystore         string // the server's PEM keystore file
	alice, mallory   issued // alice from ca; mallory from otherCA
	plain, ssl, mtls string // bound addresses
}

func startTLSBroker(t *testing.T, mut ...func(*broker.Config)) *tlsEnv {
	t.Helper()
	if len(externalSeeds()) > 0 {
		t.Skipf("needs an in-process broker with listeners of its own; %s is set", seedsEnv)
	}
	e := &tlsEnv{dir: t.TempDir(), ca: newTestCA(t, "Shoal Test CA"), otherCA: newTestCA(t, "Other CA")}
	server := e.ca.issue(t, pkix.Name{CommonName: "localhost", Organization: []string{"Shoal"}}, true)
	_, _, e.keystore = server.writeFiles(t, e.dir, "server")
	caFile := filepath.Join(e.dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, e.ca.pem, 0o600))
	e.alice = e.ca.issue(t, pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Shoal"}}, false)
	e.mallory = e.otherCA.issue(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}}, false)

	cfg := broker.DefaultConfig()
	cfg.DataDir = filepath.Join(e.dir, "data")
	cfg.Listeners = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0"
	cfg.ListenerProtocols = "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL"
	cfg.Security = map[string]string{
		"ssl.keystore.location":                      e.keystore,
		"listener.name.mtls.ssl.client.auth":         "required",
		"listener.name.mtls.ssl.truststore.location": caFile,
		"ssl.principal.mapping.rules":                `RULE:^CN=([^,]*),OU=([^,]*),.*$/$1@$2/L,DEFAULT`,
	}
	cfg.Logger = failureLogger(t)
	for _, m := range mut {
		m(&cfg)
	}
	b, err := broker.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	e.b = b
	e.plain, e.ssl, e.mtls = b.ListenerAddr("PLAINTEXT"), b.ListenerAddr("ssl"), b.ListenerAddr("MTLS")
	require.NotEmpty(t, e.ssl)
	require.NotEmpty(t, e.mtls)
	return e
}

func (e *tlsEnv) client(t *testing.T, addr string, tc *tls.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(2), kgo.RetryTimeout(5 * time.Second)}
	if tc != nil {
		all = append(all, kgo.DialTLSConfig(tc))
	}
	cl, err := kgo.NewClient(append(all, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// TestTLSListenersKgo: franz-go produces and consumes (a consumer
// group) over SSL and over mTLS, and each listener's Metadata gives the
// client that listener's endpoint.
func TestTLSListenersKgo(t *testing.T) {
	t.Parallel()
	e := startTLSBroker(t)
	ctx := testContext(t)
	for _, tc := range []struct {
		name, addr string
		cfg        *tls.Config
	}{
		{"plaintext", e.plain, nil},
		{"ssl", e.ssl, clientTLS(e.ca)},
		{"mtls", e.mtls, clientTLS(e.ca, e.alice.tlsCert(t))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "tls-" + tc.name
			cl := e.client(t, tc.addr, tc.cfg, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
			// Metadata advertises the listener the request came in on.
			md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
			require.NoError(t, err)
			require.Len(t, md.Brokers, 1)
			_, port, _ := net.SplitHostPort(tc.addr)
			require.Equal(t, port, fmt.Sprint(md.Brokers[0].Port), "advertised port on %s", tc.name)
			var recs []*kgo.Record
			for i := range 50 {
				recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat([]byte{byte(i)}, 1000)})
			}
			require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
			cons := e.client(t, tc.addr, tc.cfg, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g-"+tc.name),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := 0
			for got < 50 {
				fs := cons.PollFetches(ctx)
				require.NoError(t, ctx.Err())
				fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
				fs.EachRecord(func(r *kgo.Record) {
					require.Equal(t, fmt.Sprintf("k%d", got), string(r.Key))
					got++
				})
			}
			require.NoError(t, cons.CommitUncommittedOffsets(ctx))
			offs, err := kadm.NewClient(cl).FetchOffsets(ctx, "g-"+tc.name)
			require.NoError(t, err)
			o, _ := offs.Lookup(topic, 0)
			require.Equal(t, int64(50), o.At)
		})
	}
}

// TestMTLSPrincipalIsTheQuotaUser: the mapped principal of a client
// certificate (CN=Alice,OU=eng → alice@eng) is the user quotas match;
// a connection without a certificate is ANONYMOUS.
func TestMTLSPrincipalIsTheQuotaUser(t *testing.T) {
	t.Parallel()
	e := startTLSBroker(t)
	ctx := testContext(t)
	adm := kadm.NewClient(e.client(t, e.plain, nil))
	user := "alice@eng"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}},
	}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "quota-user")
	require.NoError(t, err)

	produce := func(addr string, tc *tls.Config) bool {
		var throttled atomic.Bool
		cl := e.client(t, addr, tc, kgo.DefaultProduceTopic("quota-user"), kgo.WithHooks(throttleHook{&throttled}))
		for range 3 {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 32<<10)}).FirstErr())
		}
		return throttled.Load()
	}
	require.True(t, produce(e.mtls, clientTLS(e.ca, e.alice.tlsCert(t))), "alice@eng is throttled")
	require.False(t, produce(e.ssl, clientTLS(e.ca)), "ANONYMOUS is not")
}

type throttleHook struct{ throttled *atomic.Bool }

func (h throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.throttled.Store(true)
	}
}

// TestTLSRefusals: what a TLS listener refuses closes the connection
// (T14): no client certificate where one is required, one from an
// untrusted CA, TLS 1.1, a plaintext Kafka client on a TLS port, and
// TLS on a plaintext port (its ClientHello read as a ~369 MB frame
// length, refused before anything is allocated). The broker serves on.
func TestTLSRefusals(t *testing.T) {
	t.Parallel()
	e := startTLSBroker(t)
	dialTLS := func(addr string, cfg *tls.Config) error {
		d := &net.Dialer{Timeout: 5 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		// TLS 1.3 reports a refused client certificate at the first read.
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(apiVersionsFrame()); err != nil {
			return err
		}
		_, err = io.ReadFull(c, make([]byte, 4))
		return err
	}
	require.NoError(t, dialTLS(e.ssl, clientTLS(e.ca)), "a TLS client on the SSL listener")
	require.NoError(t, dialTLS(e.mtls, clientTLS(e.ca, e.alice.tlsCert(t))), "alice on MTLS")
	require.Error(t, dialTLS(e.mtls, clientTLS(e.ca)), "no client certificate on MTLS")
	require.Error(t, dialTLS(e.mtls, clientTLS(e.ca, e.mallory.tlsCert(t))), "a certificate from another CA")
	old := clientTLS(e.ca)
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	require.Error(t, dialTLS(e.ssl, old), "TLS 1.1")
	require.Error(t, dialTLS(e.plain, clientTLS(e.ca)), "TLS on the plaintext listener")

	// A plaintext Kafka request on the TLS port: closed, no answer.
	c, err := net.DialTimeout("tcp", e.ssl, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Write(apiVersionsFrame())
	require.NoError(t, err)
	n, err := io.ReadAll(c)
	require.NoError(t, err, "closed by the broker, not timed out")
	// A TLS alert (7 bytes) at most, never a Kafka response.
	require.LessOrEqual(t, len(n), 7, "answered %x", n)

	// The broker still serves every listener.
	ctx := testContext(t)
	for _, l := range []struct {
		addr string
		cfg  *tls.Config
	}{{e.plain, nil}, {e.ssl, clientTLS(e.ca)}, {e.mtls, clientTLS(e.ca, e.alice.tlsCert(t))}} {
		require.NoError(t, e.client(t, l.addr, l.cfg).Ping(ctx))
	}
}

// apiVersionsFrame is an ApiVersions v3 request frame.
func apiVersionsFrame() []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
	body := req.AppendTo(nil)
	hdr := binary.BigEndian.AppendUint16(nil, 18)
	hdr = binary.BigEndian.AppendUint16(hdr, 3)
	hdr = binary.BigEndian.AppendUint32(hdr, 1)
	hdr = binary.BigEndian.AppendUint16(hdr, 0) // client id ""
	hdr = append(hdr, 0)                        // tagged fields
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)+len(body)))
	return append(append(frame, hdr...), body...)
}

// TestTLSCertificateReload: rewriting the keystore file rotates the
// server certificate for new connections, without a restart; a
// keystore rewritten with garbage keeps the last good one.
func TestTLSCertificateReload(t *testing.T) {
	t.Parallel()
	e := startTLSBroker(t)
	serial := func() string {
		c, err := tls.Dial("tcp", e.ssl, clientTLS(e.ca))
		require.NoError(t, err)
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	next := e.ca.issue(t, pkix.Name{CommonName: "localhost", Organization: []string{"Shoal rotated"}}, true)
	rewrite := func(data []byte) {
		tmp := e.keystore + ".tmp"
		require.NoError(t, os.WriteFile(tmp, data, 0o600))
		later := time.Now().Add(time.Minute) // a modification time that surely differs
		require.NoError(t, os.Chtimes(tmp, later, later))
		require.NoError(t, os.Rename(tmp, e.keystore))
	}
	rewrite(append(append([]byte{}, next.keyPEM...), next.certPEM...))
	require.Equal(t, next.cert.SerialNumber.String(), serial(), "the rotated certificate")
	require.NotEqual(t, first, next.cert.SerialNumber.String())
	rewrite([]byte("not PEM"))
	require.Equal(t, next.cert.SerialNumber.String(), serial(), "a broken keystore keeps the last good certificate")
}

// TestKcatTLS: librdkafka (kcat) produces and consumes over SSL and
// over mTLS with a client certificate, and reads the SSL listener's
// endpoint from Metadata.
func TestKcatTLS(t *testing.T) {
	t.Parallel()
	kcat := requireTool(t, "kcat")
	e := startTLSBroker(t)
	ctx := testContext(t)
	caFile := filepath.Join(e.dir, "ca.pem")
	crt, key, _ := e.alice.writeFiles(t, e.dir, "alice")
	for _, l := range []struct {
		name, addr string
		extra      []string
	}{
		{"ssl", e.ssl, nil},
		{"mtls", e.mtls, []string{"-X", "ssl.certificate.location=" + crt, "-X", "ssl.key.location=" + key}},
	} {
		args := append([]string{"-b", l.addr, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + caFile}, l.extra...)
		topic := "kcat-" + l.name
		var in strings.Builder
		for i := range 10 {
			fmt.Fprintf(&in, "k%d:v%d\n", i, i)
		}
		run(t, ctx, in.String(), kcat, append(args, "-t", topic, "-P", "-K", ":", "-X", "acks=all")...)
		out := run(t, ctx, "", kcat, append(args, "-t", topic, "-C", "-o", "beginning", "-e", "-q", "-f", "%k=%s\n")...)
		require.Equal(t, "k0=v0\nk1=v1\nk2=v2\nk3=v3\nk4=v4\nk5=v5\nk6=v6\nk7=v7\nk8=v8\nk9=v9\n", out, l.name)
		md := run(t, ctx, "", kcat, append(args, "-L")...)
		require.Contains(t, md, "at "+l.addr, "kcat -L on %s:\n%s", l.name, md)
	}
	// Without the client certificate the MTLS listener refuses kcat.
	cmdCtx, cancel := contextWithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := runErr(cmdCtx, kcat, "-b", e.mtls, "-X", "security.protocol=ssl", "-X", "ssl.ca.location="+caFile, "-L", "-m", "3")
	require.Error(t, err, "kcat without a certificate on MTLS:\n%s", out)
}

func contextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// runErr runs a command expected to fail, returning its output and error.
func runErr(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
