package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/shoal-mq/shoal/broker"
	"github.com/shoal-mq/shoal/integration/workload"
)

// saslEnv is a broker with PLAINTEXT, SASL_PLAINTEXT (SCRAM) and
// SASL_SSL (SCRAM and PLAIN) listeners. "admin" is added before the
// broker starts, as `shoal scram add` does; "alice" over the wire.
type saslEnv struct {
	b                  *broker.Broker
	dir                string
	ca                 *testCA
	plain, sasl, saslS string
	mtls               string // SSL with required client certificates from ca
	start              func()
}

const adminPassword, alicePassword = "admin-secret", "alice-secret"

func startSASLBroker(t *testing.T, mut ...func(*broker.Config)) *saslEnv {
	t.Helper()
	if len(externalSeeds()) > 0 {
		t.Skipf("needs an in-process broker with listeners of its own; %s is set", seedsEnv)
	}
	e := &saslEnv{dir: t.TempDir(), ca: newTestCA(t, "Shoal SASL CA")}
	_, _, keystore := e.ca.issue(t, pkix.Name{CommonName: "localhost"}, true).writeFiles(t, e.dir, "server")
	cfg := broker.DefaultConfig()
	cfg.DataDir = filepath.Join(e.dir, "data")
	caFile := filepath.Join(e.dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, e.ca.pem, 0o600))
	cfg.Listeners = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0"
	cfg.ListenerProtocols = "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL"
	cfg.Security = map[string]string{
		"ssl.keystore.location":                          keystore,
		"listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
		"listener.name.mtls.ssl.client.auth":             "required",
		"listener.name.mtls.ssl.truststore.location":     caFile,
	}
	cfg.Logger = failureLogger(t)
	for _, m := range mut {
		m(&cfg)
	}
	require.NoError(t, broker.ScramAdd(cfg.DataDir, "SCRAM-SHA-512", "admin", adminPassword, 8192))
	e.start = func() {
		b, err := broker.Start(cfg)
		require.NoError(t, err)
		e.b = b
		e.plain, e.sasl, e.saslS = b.ListenerAddr("PLAINTEXT"), b.ListenerAddr("SASL_PLAINTEXT"), b.ListenerAddr("SASL_SSL")
		e.mtls = b.ListenerAddr("MTLS")
	}
	e.start()
	t.Cleanup(func() { e.b.Close() })
	return e
}

func (e *saslEnv) restart(t *testing.T) {
	t.Helper()
	require.NoError(t, e.b.Close())
	e.start()
}

func (e *saslEnv) client(t *testing.T, addr string, tc *tls.Config, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(1), kgo.RetryTimeout(5 * time.Second)}
	if tc != nil {
		all = append(all, kgo.DialTLSConfig(tc))
	}
	if m != nil {
		all = append(all, kgo.SASL(m))
	}
	cl, err := kgo.NewClient(append(all, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func scram256(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
}

func scram512(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
}

// addAlice adds alice's SCRAM-SHA-256 and -512 credentials with kadm,
// authenticated as admin.
func (e *saslEnv) addAlice(t *testing.T, ctx context.Context) {
	t.Helper()
	adm := kadm.NewClient(e.client(t, e.sasl, nil, scram512("admin", adminPassword)))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: alicePassword},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: alicePassword},
	})
	require.NoError(t, err)
	require.NoError(t, res.Error())
}

// TestSASLScramKgo: franz-go authenticates with SCRAM-SHA-256 and
// SCRAM-SHA-512 on SASL_PLAINTEXT and SASL_SSL, and with PLAIN on
// SASL_SSL, then produces, consumes in a group and in a share group;
// credentials made with kadm are durable across a restart.
func TestSASLScramKgo(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t)
	ctx := testContext(t)
	e.addAlice(t, ctx)
	e.restart(t) // credentials are durable
	tc := clientTLS(e.ca)
	for _, c := range []struct {
		name string
		addr string
		tls  *tls.Config
		mech sasl.Mechanism
	}{
		{"scram256-plaintext", e.sasl, nil, scram256("alice", alicePassword)},
		{"scram512-plaintext", e.sasl, nil, scram512("alice", alicePassword)},
		{"scram256-ssl", e.saslS, tc, scram256("alice", alicePassword)},
		{"scram512-ssl", e.saslS, tc, scram512("alice", alicePassword)},
		{"plain-ssl", e.saslS, tc, plain.Auth{User: "alice", Pass: alicePassword}.AsMechanism()},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic := "sasl-" + c.name
			cl := e.client(t, c.addr, c.tls, c.mech, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
			md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
			require.NoError(t, err)
			_, port, _ := net.SplitHostPort(c.addr)
			require.Equal(t, port, fmt.Sprint(md.Brokers[0].Port))
			for i := range 20 {
				require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}).FirstErr())
			}
			cons := e.client(t, c.addr, c.tls, c.mech, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g-"+c.name),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := 0
			for got < 20 {
				fs := cons.PollFetches(ctx)
				require.NoError(t, ctx.Err())
				fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
				got += fs.NumRecords()
			}
			require.Equal(t, 20, got)
		})
	}
	// A share group over SASL_SSL.
	_, err := kadm.NewClient(e.client(t, e.plain, nil, nil)).CreateTopic(ctx, 1, 1, nil, "sasl-share")
	require.NoError(t, err)
	p := e.client(t, e.saslS, tc, scram256("alice", alicePassword), kgo.DefaultProduceTopic("sasl-share"))
	for i := range 10 {
		require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "s%d", i)}).FirstErr())
	}
	require.NoError(t, workload.SetGroupConfigs(ctx, e.client(t, e.plain, nil, nil), "sasl-sg", "share.auto.offset.reset", "earliest"))
	sc := e.client(t, e.saslS, tc, scram256("alice", alicePassword), kgo.ShareGroup("sasl-sg"), kgo.ConsumeTopics("sasl-share"))
	seen := 0
	for seen < 10 {
		fs := sc.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		seen += fs.NumRecords()
	}
}

// saslRaw is a raw connection that speaks SaslHandshake and
// SaslAuthenticate itself.
type saslRaw struct {
	t  *testing.T
	nc net.Conn
	id int32
}

func dialSASLRaw(t *testing.T, addr string) *saslRaw {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &saslRaw{t: t, nc: nc}
}

// do sends req and reads its response; an error means the connection
// closed.
func (r *saslRaw) do(req kmsg.Request) (kmsg.Response, error) {
	r.id++
	body := req.AppendTo(nil)
	hdr := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(req.GetVersion()))
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(r.id))
	hdr = binary.BigEndian.AppendUint16(hdr, 4)
	hdr = append(hdr, "test"...)
	if req.IsFlexible() {
		hdr = append(hdr, 0)
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)+len(body)))
	if _, err := r.nc.Write(append(append(frame, hdr...), body...)); err != nil {
		return nil, err
	}
	var n [4]byte
	if _, err := io.ReadFull(r.nc, n[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(r.nc, buf); err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	buf = buf[4:] // correlation id
	if resp.IsFlexible() && req.Key() != 18 {
		buf = buf[1:] // empty tagged fields
	}
	require.NoError(r.t, resp.ReadFrom(buf))
	return resp, nil
}

func (r *saslRaw) handshake(mech string) *kmsg.SASLHandshakeResponse {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, mech
	resp, err := r.do(req)
	require.NoError(r.t, err)
	return resp.(*kmsg.SASLHandshakeResponse)
}

func (r *saslRaw) authenticate(b []byte) (*kmsg.SASLAuthenticateResponse, error) {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 2, b
	resp, err := r.do(req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.SASLAuthenticateResponse), nil
}

// closed reports whether the broker closed the connection (a read
// returns EOF or a reset, not a timeout).
func (r *saslRaw) closed() bool {
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := r.nc.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func metadataReq() kmsg.Request {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	return req
}

// TestSASLRefusals (T14): bad credentials get SASL_AUTHENTICATION_FAILED
// (the same for an unknown user and a wrong password), no sooner than
// the failure delay, and the connection closes; a request before
// authentication closes the connection; an authorization id naming
// someone else is refused; an unknown mechanism is
// UNSUPPORTED_SASL_MECHANISM.
func TestSASLRefusals(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t)
	ctx := testContext(t)

	// franz-go with a wrong password and with an unknown user: the
	// same error.
	var msgs []string
	for _, m := range []sasl.Mechanism{scram256("admin", "wrong"), scram512("admin", "wrong"), scram256("nobody", "x"),
		plain.Auth{User: "admin", Pass: "wrong"}.AsMechanism(), plain.Auth{User: "nobody", Pass: "x"}.AsMechanism()} {
		addr, tc := e.sasl, (*tls.Config)(nil)
		if m.Name() == "PLAIN" {
			addr, tc = e.saslS, clientTLS(e.ca)
		}
		cl := e.client(t, addr, tc, m)
		err := cl.Ping(ctx)
		require.Error(t, err, m.Name())
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, m.Name())
		var ke *kerr.Error
		require.True(t, errors.As(err, &ke))
		msgs = append(msgs, strings.ReplaceAll(strings.ReplaceAll(err.Error(), "SCRAM-SHA-512", "M"), "SCRAM-SHA-256", "M"))
	}
	require.Equal(t, msgs[0], msgs[2], "an unknown user and a wrong password get the same answer")
	require.Equal(t, msgs[3], msgs[4])

	// Raw: a wrong PLAIN password is answered after the delay, then the
	// connection closes.
	r := dialSASLRaw(t, e.saslS)
	r.nc = tls.Client(r.nc, clientTLS(e.ca))
	require.Zero(t, r.handshake("PLAIN").ErrorCode)
	began := time.Now()
	resp, err := r.authenticate([]byte("\x00admin\x00wrong"))
	require.NoError(t, err)
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
	require.GreaterOrEqual(t, time.Since(began), 100*time.Millisecond, "connection.failed.authentication.delay.ms")
	require.True(t, r.closed())

	// Impersonation: PLAIN with an authorization id of someone else.
	r = dialSASLRaw(t, e.saslS)
	r.nc = tls.Client(r.nc, clientTLS(e.ca))
	require.Zero(t, r.handshake("PLAIN").ErrorCode)
	resp, err = r.authenticate([]byte("alice\x00admin\x00" + adminPassword))
	require.NoError(t, err)
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode, "authzid alice for admin")

	// The right password with authzid = the user works.
	r = dialSASLRaw(t, e.saslS)
	r.nc = tls.Client(r.nc, clientTLS(e.ca))
	require.Zero(t, r.handshake("PLAIN").ErrorCode)
	resp, err = r.authenticate([]byte("admin\x00admin\x00" + adminPassword))
	require.NoError(t, err)
	require.Zero(t, resp.ErrorCode)
	_, err = r.do(metadataReq())
	require.NoError(t, err, "authenticated: Metadata is served")

	// Before authentication: Metadata closes the connection.
	r = dialSASLRaw(t, e.sasl)
	_, err = r.do(metadataReq())
	require.Error(t, err, "Metadata before SaslHandshake")
	// SaslAuthenticate without a handshake, too.
	r = dialSASLRaw(t, e.sasl)
	_, err = r.authenticate([]byte("n,,n=admin,r=abc"))
	require.Error(t, err)
	// An unknown mechanism, and PLAIN where it is not enabled.
	for _, mech := range []string{"GSSAPI", "PLAIN"} {
		r = dialSASLRaw(t, e.sasl)
		h := r.handshake(mech)
		require.Equal(t, kerr.UnsupportedSaslMechanism.Code, h.ErrorCode, mech)
		require.Equal(t, []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}, h.SupportedMechanisms)
		require.True(t, r.closed())
	}
	// A pre-authentication frame over 512 KiB closes the connection
	// without being read.
	r = dialSASLRaw(t, e.sasl)
	big := binary.BigEndian.AppendUint32(nil, 600<<10)
	_, err = r.nc.Write(big)
	require.NoError(t, err)
	require.True(t, r.closed())
	// A SCRAM client-final with a nonce other than the server's
	// (CVE-2024-56128) fails.
	r = dialSASLRaw(t, e.sasl)
	require.Zero(t, r.handshake("SCRAM-SHA-512").ErrorCode)
	first, err := r.authenticate([]byte("n,,n=admin,r=clientnonce"))
	require.NoError(t, err)
	require.Zero(t, first.ErrorCode)
	require.True(t, strings.HasPrefix(string(first.SASLAuthBytes), "r=clientnonce"), "%s", first.SASLAuthBytes)
	resp, err = r.authenticate([]byte("c=biws,r=clientnonceOTHER,p=" + strings.Repeat("A", 88)))
	require.NoError(t, err)
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
	// librdkafka before 2.6.1 repeats its nonce before the server's
	// (accepted, as Kafka 3.8.1-3.9 do); with a bad proof it still fails.
	r = dialSASLRaw(t, e.sasl)
	require.Zero(t, r.handshake("SCRAM-SHA-512").ErrorCode)
	first, err = r.authenticate([]byte("n,,n=admin,r=clientnonce"))
	require.NoError(t, err)
	serverNonce := strings.TrimPrefix(strings.Split(string(first.SASLAuthBytes), ",")[0], "r=")
	resp, err = r.authenticate([]byte("c=biws,r=clientnonce" + serverNonce + ",p=" + strings.Repeat("A", 86) + "=="))
	require.NoError(t, err)
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
	// SaslHandshake on a listener without SASL.
	r = dialSASLRaw(t, e.plain)
	require.Equal(t, kerr.IllegalSaslState.Code, r.handshake("PLAIN").ErrorCode)
	// SaslAuthenticate there: ILLEGAL_SASL_STATE, closed (no handler panic).
	r = dialSASLRaw(t, e.plain)
	resp, err = r.authenticate([]byte("x"))
	require.NoError(t, err)
	require.Equal(t, kerr.IllegalSaslState.Code, resp.ErrorCode)
	require.True(t, r.closed())
}

// TestSASLv0AndNames: SaslHandshake v0 with bare tokens (a token shorter
// than a request header included), and SCRAM user names with ',' and
// '=' (sent as =2C and =3D).
func TestSASLv0AndNames(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t)
	ctx := testContext(t)
	adm := kadm.NewClient(e.client(t, e.sasl, nil, scram512("admin", adminPassword)))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "ab", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "cd"},
		{User: "a,b=c", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "odd-name"},
	})
	require.NoError(t, err)
	require.NoError(t, res.Error())
	// v0: the PLAIN token "\0ab\0cd" is 6 bytes, a bare frame.
	r := dialSASLRaw(t, e.saslS)
	r.nc = tls.Client(r.nc, clientTLS(e.ca))
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 0, "PLAIN"
	h, err := r.do(req)
	require.NoError(t, err)
	require.Zero(t, h.(*kmsg.SASLHandshakeResponse).ErrorCode)
	tok := []byte("\x00ab\x00cd")
	_, err = r.nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...))
	require.NoError(t, err)
	var n [4]byte
	_, err = io.ReadFull(r.nc, n[:])
	require.NoError(t, err)
	require.Zero(t, binary.BigEndian.Uint32(n[:]), "PLAIN's empty server token")
	_, err = r.do(metadataReq())
	require.NoError(t, err, "authenticated through v0")
	// A wrong v0 password: closed, no answer.
	r = dialSASLRaw(t, e.saslS)
	r.nc = tls.Client(r.nc, clientTLS(e.ca))
	_, err = r.do(req)
	require.NoError(t, err)
	tok = []byte("\x00ab\x00xx")
	_, err = r.nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...))
	require.NoError(t, err)
	require.True(t, r.closed())
	// franz-go escapes the name; the broker decodes it.
	require.NoError(t, e.client(t, e.sasl, nil, scram256("a,b=c", "odd-name")).Ping(ctx))
}

// TestSuperUsersGuardScramAPIs: with super.users set, only they may
// describe or alter SCRAM credentials with the authorizer off; without it anyone
// may, as in Kafka without an authorizer.
func TestSuperUsersGuardScramAPIs(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t, func(c *broker.Config) { c.Security["super.users"] = "User:admin" })
	ctx := testContext(t)
	anon := kadm.NewClient(e.client(t, e.plain, nil, nil))
	// Raw, to see the broker's answer per user (kadm folds it into err).
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "eve", 1, 4096, []byte("salt"), []byte("salted")
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Upsertions = append(alter.Upsertions, up)
	ar, err := alter.RequestWith(ctx, e.client(t, e.plain, nil, nil))
	require.NoError(t, err)
	require.Len(t, ar.Results, 1)
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, ar.Results[0].ErrorCode, "ANONYMOUS may not add eve")
	_, err = anon.DescribeUserSCRAMs(ctx)
	require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed)
	admin := kadm.NewClient(e.client(t, e.sasl, nil, scram512("admin", adminPassword)))
	e.addAlice(t, ctx)
	alice := kadm.NewClient(e.client(t, e.sasl, nil, scram256("alice", alicePassword)))
	res, err := alice.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "admin", Mechanism: kadm.ScramSha512}}, nil)
	if err == nil {
		err = res["admin"].Err
	}
	require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed, "alice cannot lock admin out")
	d, err := admin.DescribeUserSCRAMs(ctx)
	require.NoError(t, err)
	require.Len(t, d, 2)
	// An empty user list is every user, as a null one.
	raw := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	raw.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{}
	rr, err := raw.RequestWith(ctx, e.client(t, e.sasl, nil, scram512("admin", adminPassword)))
	require.NoError(t, err)
	require.Len(t, rr.Results, 2)
}

// TestSASLReauthentication (KIP-368): with connections.max.reauth.ms
// set, franz-go re-authenticates by itself and goes on working past
// several lifetimes; a client that does not is closed at its first
// request after its session expired.
func TestSASLReauthentication(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t, func(c *broker.Config) { c.Security["connections.max.reauth.ms"] = "1500" })
	ctx := testContext(t)
	cl := e.client(t, e.sasl, nil, scram512("admin", adminPassword), kgo.DefaultProduceTopic("reauth"), kgo.AllowAutoTopicCreation())
	deadline := time.Now().Add(5 * time.Second)
	n := 0
	for time.Now().Before(deadline) {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr())
		n++
		time.Sleep(100 * time.Millisecond)
	}
	require.Greater(t, n, 20)

	// A raw client: authenticated, told its lifetime, then idle past it.
	r := dialSASLRaw(t, e.saslS)
	r.nc = tls.Client(r.nc, clientTLS(e.ca))
	require.Zero(t, r.handshake("PLAIN").ErrorCode)
	resp, err := r.authenticate([]byte("\x00admin\x00" + adminPassword))
	require.NoError(t, err)
	require.Zero(t, resp.ErrorCode)
	require.InDelta(t, 1500, resp.SessionLifetimeMillis, 50)
	_, err = r.do(metadataReq())
	require.NoError(t, err)
	time.Sleep(1600 * time.Millisecond)
	_, err = r.do(metadataReq())
	require.Error(t, err, "a request after the session expired closes the connection")
}

// TestScramCredentialsAdmin: Describe/AlterUserScramCredentials through
// kadm with Kafka's errors, and `shoal scram` against a stopped
// broker's data directory.
func TestScramCredentialsAdmin(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t)
	ctx := testContext(t)
	adm := kadm.NewClient(e.client(t, e.plain, nil, nil))
	e.addAlice(t, ctx)
	d, err := adm.DescribeUserSCRAMs(ctx)
	require.NoError(t, err)
	require.NoError(t, d.Error())
	require.Len(t, d["admin"].CredInfos, 1)
	require.Equal(t, int32(8192), d["admin"].CredInfos[0].Iterations)
	require.Len(t, d["alice"].CredInfos, 2)
	d, err = adm.DescribeUserSCRAMs(ctx, "nobody")
	require.NoError(t, err)
	require.ErrorIs(t, d["nobody"].Err, kerr.ResourceNotFound)

	// kadm refuses such iterations itself; a raw request reaches the broker.
	raw := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range []struct {
		name  string
		iters int32
		mech  int8
	}{{"weak", 1000, 1}, {"strong", 20000, 2}, {"nomech", 4096, 3}, {"", 4096, 1}} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u.name, u.mech, u.iters, []byte("salt"), []byte("salted")
		raw.Upsertions = append(raw.Upsertions, up)
	}
	rr, err := raw.RequestWith(ctx, e.client(t, e.plain, nil, nil))
	require.NoError(t, err)
	codes := map[string]int16{}
	for _, r := range rr.Results {
		codes[r.User] = r.ErrorCode
	}
	require.Equal(t, map[string]int16{"weak": kerr.UnacceptableCredential.Code, "strong": kerr.UnacceptableCredential.Code,
		"nomech": kerr.UnsupportedSaslMechanism.Code, "": kerr.UnacceptableCredential.Code}, codes)
	res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "nobody", Mechanism: kadm.ScramSha256}}, nil)
	require.NoError(t, err)
	require.ErrorIs(t, res["nobody"].Err, kerr.ResourceNotFound)
	res, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}},
		[]kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "new"}})
	require.NoError(t, err)
	require.ErrorIs(t, res["alice"].Err, kerr.DuplicateResource)

	// Deleting alice's SHA-256 credential: she can no longer log in
	// with it, still with SHA-512.
	res, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil)
	require.NoError(t, err)
	require.NoError(t, res.Error())
	require.ErrorIs(t, e.client(t, e.sasl, nil, scram256("alice", alicePassword)).Ping(ctx), kerr.SaslAuthenticationFailed)
	require.NoError(t, e.client(t, e.sasl, nil, scram512("alice", alicePassword)).Ping(ctx))

	// Offline: the broker's data directory is locked while it runs.
	dataDir := filepath.Join(e.dir, "data")
	require.Error(t, broker.ScramAdd(dataDir, "SCRAM-SHA-256", "bob", "pw", 4096), "while the broker runs")
	require.NoError(t, e.b.Close())
	require.NoError(t, broker.ScramAdd(dataDir, "SCRAM-SHA-256", "bob", "bob-pw", 4096))
	require.ErrorContains(t, broker.ScramAdd(dataDir, "SCRAM-SHA-256", "bob", "bob-pw", 100), "iterations")
	list, err := broker.ScramList(dataDir)
	require.NoError(t, err)
	require.Contains(t, list, broker.ScramCredential{User: "bob", Mechanism: "SCRAM-SHA-256", Iterations: 4096})
	require.NoError(t, broker.ScramDelete(dataDir, "SCRAM-SHA-512", "admin"))
	require.Error(t, broker.ScramDelete(dataDir, "SCRAM-SHA-512", "admin"))
	e.start()
	require.NoError(t, e.client(t, e.sasl, nil, scram256("bob", "bob-pw")).Ping(ctx))
	require.ErrorIs(t, e.client(t, e.sasl, nil, scram512("admin", adminPassword)).Ping(ctx), kerr.SaslAuthenticationFailed)
}

// TestKcatSASL: librdkafka (kcat) with SCRAM-SHA-256 and -512 over
// SASL_SSL and SASL_PLAINTEXT.
func TestKcatSASL(t *testing.T) {
	t.Parallel()
	kcat := requireTool(t, "kcat")
	e := startSASLBroker(t)
	ctx := testContext(t)
	e.addAlice(t, ctx)
	caFile := filepath.Join(e.dir, "ca.pem")
	for _, c := range []struct {
		name, addr, proto, mech string
	}{
		{"ssl-256", e.saslS, "sasl_ssl", "SCRAM-SHA-256"},
		{"ssl-512", e.saslS, "sasl_ssl", "SCRAM-SHA-512"},
		{"plaintext-512", e.sasl, "sasl_plaintext", "SCRAM-SHA-512"},
	} {
		args := []string{"-b", c.addr, "-X", "security.protocol=" + c.proto, "-X", "sasl.mechanisms=" + c.mech,
			"-X", "sasl.username=alice", "-X", "sasl.password=" + alicePassword}
		if c.proto == "sasl_ssl" {
			args = append(args, "-X", "ssl.ca.location="+caFile)
		}
		topic := "kcat-sasl-" + c.name
		run(t, ctx, "a\nb\nc\n", kcat, append(args, "-t", topic, "-P", "-X", "acks=all")...)
		out := run(t, ctx, "", kcat, append(args, "-t", topic, "-C", "-o", "beginning", "-e", "-q")...)
		require.Equal(t, "a\nb\nc\n", out, c.name)
	}
	cmdCtx, cancel := contextWithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := runErr(cmdCtx, kcat, "-b", e.sasl, "-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=SCRAM-SHA-256",
		"-X", "sasl.username=alice", "-X", "sasl.password=wrong", "-L", "-m", "5")
	require.Error(t, err, "kcat with a wrong password:\n%s", out)
}

// TestSecurityConfigsDescribed: DescribeConfigs of the broker lists the
// security configs, read-only, with their sources, the listener
// overrides by their full names, and keys without their values (Kafka's
// sensitive configs).
func TestSecurityConfigsDescribed(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t, func(c *broker.Config) {
		// The MTLS listener's key and chain inline (the keystore file
		// holds the key, then the chain).
		pemData, err := os.ReadFile(c.Security["ssl.keystore.location"])
		require.NoError(t, err)
		i := strings.Index(string(pemData), "-----BEGIN CERTIFICATE-----")
		require.Positive(t, i)
		c.Security["listener.name.mtls.ssl.keystore.location"] = ""
		c.Security["listener.name.mtls.ssl.keystore.key"] = string(pemData[:i])
		c.Security["listener.name.mtls.ssl.keystore.certificate.chain"] = string(pemData[i:])
	})
	ctx := testContext(t)
	rcs, err := kadm.NewClient(e.client(t, e.plain, nil, nil)).DescribeBrokerConfigs(ctx, 0)
	require.NoError(t, err)
	require.Len(t, rcs, 1)
	got := map[string]kadm.Config{}
	for _, c := range rcs[0].Configs {
		got[c.Key] = c
	}
	loc := got["ssl.keystore.location"]
	require.NotNil(t, loc.Value)
	require.True(t, strings.HasSuffix(*loc.Value, ".pem"), *loc.Value)
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, loc.Source)
	require.False(t, loc.Sensitive)
	mech := got["listener.name.sasl_ssl.sasl.enabled.mechanisms"]
	require.NotNil(t, mech.Value)
	require.Equal(t, "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN", *mech.Value)
	def := got["sasl.enabled.mechanisms"]
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, def.Source)
	key := got["listener.name.mtls.ssl.keystore.key"]
	require.True(t, key.Sensitive)
	require.Nil(t, key.Value, "a key is never described")
	require.Contains(t, got, "authorizer.class.name")
}
