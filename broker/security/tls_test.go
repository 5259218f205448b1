package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pki is a certificate with its key, in PEM too.
type pki struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func newSerial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	require.NoError(t, err)
	return n
}

func makeCert(t *testing.T, tmpl *x509.Certificate, parent *pki) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl.SerialNumber = newSerial(t)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	parentCert, signer := tmpl, key
	if parent != nil {
		parentCert, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, &key.PublicKey, signer)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return &pki{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

func newCA(t *testing.T, cn string) *pki {
	return makeCert(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Test CA"}},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
}

// serverCert is a localhost / 127.0.0.1 server certificate signed by ca.
func (ca *pki) serverCert(t *testing.T, cn string) *pki {
	return makeCert(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca)
}

func (ca *pki) clientCert(t *testing.T, subject pkix.Name) *pki {
	return makeCert(t, &x509.Certificate{
		Subject:     subject,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
}

func (p *pki) tlsCert(t *testing.T) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.certPEM, p.keyPEM)
	require.NoError(t, err)
	return c
}

// keystorePEM is a PEM keystore file: the key, the leaf, then the CA.
func keystorePEM(leaf, ca *pki) []byte {
	out := append([]byte{}, leaf.keyPEM...)
	out = append(out, leaf.certPEM...)
	return append(out, ca.certPEM...)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// rewrite replaces a file's content and moves its modification time on
// by an hour, so the change is seen whatever the file system's timestamp
// granularity and even if the size is unchanged.
func rewrite(t *testing.T, path string, data []byte) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	writeFile(t, path, data)
	next := fi.ModTime().Add(time.Hour)
	require.NoError(t, os.Chtimes(path, next, next))
}

// env is a CA, a server certificate it signed, and their files.
type env struct {
	ca, server         *pki
	dir                string
	keystore, trustore string
}

func newEnv(t *testing.T) *env {
	e := &env{ca: newCA(t, "ca-1"), dir: t.TempDir()}
	e.server = e.ca.serverCert(t, "server-1")
	e.keystore = filepath.Join(e.dir, "keystore.pem")
	e.trustore = filepath.Join(e.dir, "truststore.pem")
	writeFile(t, e.keystore, keystorePEM(e.server, e.ca))
	writeFile(t, e.trustore, e.ca.certPEM)
	return e
}

func (e *env) clientConfig(certs ...*pki) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(e.ca.cert)
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	for _, c := range certs {
		cfg.Certificates = append(cfg.Certificates, tls.Certificate{
			Certificate: [][]byte{c.cert.Raw},
			PrivateKey:  c.key,
		})
	}
	return cfg
}

// forceCert makes cli send p when asked for a certificate, whatever CAs
// the server names (a crypto/tls client otherwise sends none that the
// server's CAs did not sign).
func forceCert(cli *tls.Config, p *pki) *tls.Config {
	cli.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &tls.Certificate{Certificate: [][]byte{p.cert.Raw}, PrivateKey: p.key}, nil
	}
	return cli
}

// warnings records the warn callback's calls.
type warnings struct {
	mu   sync.Mutex
	msgs []string
	errs []error
}

func (w *warnings) warn(msg string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
	w.errs = append(w.errs, err)
}

func (w *warnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.msgs)
}

type handshakeResult struct {
	server, client       tls.ConnectionState
	serverErr, clientErr error
}

// handshake runs one TLS handshake over loopback TCP between a server
// with srv and a client with cli. Once the server's handshake is done it
// writes a byte, which the client reads: in TLS 1.3 a client's handshake
// can end before the server has refused its certificate, and the read
// then returns the server's alert.
func handshake(t *testing.T, srv, cli *tls.Config) handshakeResult {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	deadline := time.Now().Add(30 * time.Second) // a safety net only

	type side struct {
		state tls.ConnectionState
		err   error
	}
	done := make(chan side, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- side{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(deadline)
		tc := tls.Server(c, srv)
		err = tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte{1})
		}
		done <- side{tc.ConnectionState(), err}
	}()

	var r handshakeResult
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	_ = c.SetDeadline(deadline)
	tc := tls.Client(c, cli)
	r.clientErr = tc.Handshake()
	if r.clientErr == nil {
		var b [1]byte
		_, r.clientErr = io.ReadFull(tc, b[:])
	}
	r.client = tc.ConnectionState()
	c.Close()
	s := <-done
	r.server, r.serverErr = s.state, s.err
	return r
}

func newServerTLS(t *testing.T, s Settings, w *warnings) *ServerTLS {
	t.Helper()
	var warn func(string, error)
	if w != nil {
		warn = w.warn
	}
	st, err := NewServerTLS(s, "SSL", warn)
	require.NoError(t, err)
	return st
}

func servedCN(t *testing.T, st *ServerTLS, cli *tls.Config) string {
	t.Helper()
	r := handshake(t, st.Config(), cli)
	require.NoError(t, r.serverErr)
	require.NoError(t, r.clientErr)
	require.NotEmpty(t, r.client.PeerCertificates)
	return r.client.PeerCertificates[0].Subject.CommonName
}

func TestNewServerTLSKeystoreFile(t *testing.T) {
	e := newEnv(t)
	st := newServerTLS(t, Settings{"ssl.keystore.location": e.keystore}, nil)
	require.Equal(t, ClientAuthNone, st.ClientAuth())

	cfg := st.Config()
	require.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
	require.Equal(t, uint16(tls.VersionTLS13), cfg.MaxVersion)

	r := handshake(t, cfg, e.clientConfig())
	require.NoError(t, r.serverErr)
	require.NoError(t, r.clientErr)
	require.Equal(t, uint16(tls.VersionTLS13), r.client.Version)
	// The whole chain is served: leaf, then the CA.
	require.Len(t, r.client.PeerCertificates, 2)
	require.Equal(t, "server-1", r.client.PeerCertificates[0].Subject.CommonName)
	require.Equal(t, "ca-1", r.client.PeerCertificates[1].Subject.CommonName)

	p, err := st.Principal(r.server)
	require.NoError(t, err)
	require.Equal(t, Anonymous, p)
}

func TestNewServerTLSKeyAfterChainAndOtherKeyTypes(t *testing.T) {
	e := newEnv(t)
	// Chain first, key last, as an EC PRIVATE KEY (SEC 1).
	ecDER, err := x509.MarshalECPrivateKey(e.server.key)
	require.NoError(t, err)
	data := append(append([]byte{}, e.server.certPEM...), e.ca.certPEM...)
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER})...)
	writeFile(t, e.keystore, data)
	st := newServerTLS(t, Settings{"ssl.keystore.location": e.keystore}, nil)
	require.Equal(t, "server-1", servedCN(t, st, e.clientConfig()))
}

func TestNewServerTLSInline(t *testing.T) {
	e := newEnv(t)
	client := e.ca.clientCert(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Example"}, Country: []string{"US"}})
	st := newServerTLS(t, Settings{
		"ssl.keystore.certificate.chain": string(e.server.certPEM) + string(e.ca.certPEM),
		"ssl.keystore.key":               string(e.server.keyPEM),
		"ssl.truststore.certificates":    string(e.ca.certPEM),
		"ssl.client.auth":                "required",
	}, nil)
	require.Equal(t, ClientAuthRequired, st.ClientAuth())

	r := handshake(t, st.Config(), e.clientConfig(client))
	require.NoError(t, r.serverErr)
	require.NoError(t, r.clientErr)
	require.Equal(t, "server-1", r.client.PeerCertificates[0].Subject.CommonName)
	p, err := st.Principal(r.server)
	require.NoError(t, err)
	require.Equal(t, "User:CN=alice,OU=eng,O=Example,C=US", p)
}

func TestNewServerTLSListenerOverrides(t *testing.T) {
	e := newEnv(t)
	other := filepath.Join(t.TempDir(), "missing.pem")
	st, err := NewServerTLS(Settings{
		"ssl.keystore.location":                          other,
		"listener.name.mtls.ssl.keystore.location":       e.keystore,
		"listener.name.mtls.ssl.client.auth":             "REQUIRED",
		"listener.name.mtls.ssl.truststore.location":     e.trustore,
		"listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/U",
		"ssl.principal.mapping.rules":                    "RULE:x/y/",
	}, "MTLS", nil)
	require.NoError(t, err)
	require.Equal(t, ClientAuthRequired, st.ClientAuth())
	client := e.ca.clientCert(t, pkix.Name{CommonName: "bob", Organization: []string{"Example"}})
	r := handshake(t, st.Config(), e.clientConfig(client))
	require.NoError(t, r.serverErr)
	require.NoError(t, r.clientErr)
	p, err := st.Principal(r.server)
	require.NoError(t, err)
	require.Equal(t, "User:BOB", p)

	// The plain keystore (missing) is the one another listener gets.
	_, err = NewServerTLS(Settings{
		"ssl.keystore.location":                    other,
		"listener.name.mtls.ssl.keystore.location": e.keystore,
	}, "SSL", nil)
	require.Error(t, err)
}

func TestNewServerTLSErrors(t *testing.T) {
	e := newEnv(t)
	garbage := filepath.Join(e.dir, "garbage.pem")
	writeFile(t, garbage, []byte("not PEM at all\n"))
	certOnly := filepath.Join(e.dir, "cert-only.pem")
	writeFile(t, certOnly, e.server.certPEM)
	keyOnly := filepath.Join(e.dir, "key-only.pem")
	writeFile(t, keyOnly, e.server.keyPEM)
	mismatch := filepath.Join(e.dir, "mismatch.pem")
	writeFile(t, mismatch, append(append([]byte{}, e.ca.keyPEM...), e.server.certPEM...))
	missing := filepath.Join(e.dir, "missing.pem")

	for _, c := range []struct {
		name string
		s    Settings
		want string
	}{
		{"no keystore", Settings{}, "ssl.keystore.location"},
		{"chain without key", Settings{"ssl.keystore.certificate.chain": string(e.server.certPEM)}, "ssl.keystore.location"},
		{"key without chain", Settings{"ssl.keystore.key": string(e.server.keyPEM)}, "ssl.keystore.location"},
		{"file and inline chain", Settings{"ssl.keystore.location": e.keystore, "ssl.keystore.certificate.chain": string(e.server.certPEM)}, "not both"},
		{"file and inline key", Settings{"ssl.keystore.location": e.keystore, "ssl.keystore.key": string(e.server.keyPEM)}, "not both"},
		{"missing keystore file", Settings{"ssl.keystore.location": missing}, "ssl.keystore.location"},
		{"keystore not PEM", Settings{"ssl.keystore.location": garbage}, "PEM"},
		{"keystore without key", Settings{"ssl.keystore.location": certOnly}, "PEM"},
		{"keystore without certificate", Settings{"ssl.keystore.location": keyOnly}, "PEM"},
		{"key not the certificate's", Settings{"ssl.keystore.location": mismatch}, "keystore"},
		{"inline key not PEM", Settings{"ssl.keystore.certificate.chain": string(e.server.certPEM), "ssl.keystore.key": "nope"}, "keystore"},
		{"required without truststore", Settings{"ssl.keystore.location": e.keystore, "ssl.client.auth": "required"}, "truststore"},
		{"requested without truststore", Settings{"ssl.keystore.location": e.keystore, "ssl.client.auth": "requested"}, "truststore"},
		{"truststore file and inline", Settings{"ssl.keystore.location": e.keystore, "ssl.client.auth": "required", "ssl.truststore.location": e.trustore, "ssl.truststore.certificates": string(e.ca.certPEM)}, "not both"},
		{"missing truststore file", Settings{"ssl.keystore.location": e.keystore, "ssl.client.auth": "required", "ssl.truststore.location": missing}, "ssl.truststore.location"},
		{"truststore without certificates", Settings{"ssl.keystore.location": e.keystore, "ssl.client.auth": "required", "ssl.truststore.location": garbage}, "truststore"},
		{"TLSv1.1", Settings{"ssl.keystore.location": e.keystore, "ssl.enabled.protocols": "TLSv1.2,TLSv1.1"}, "ssl.enabled.protocols"},
		{"TLSv1", Settings{"ssl.keystore.location": e.keystore, "ssl.enabled.protocols": "TLSv1"}, "ssl.enabled.protocols"},
		{"no protocol", Settings{"ssl.keystore.location": e.keystore, "ssl.enabled.protocols": " , "}, "ssl.enabled.protocols"},
		{"unknown cipher suite", Settings{"ssl.keystore.location": e.keystore, "ssl.cipher.suites": "TLS_RSA_WITH_RC4_128_SHA"}, "ssl.cipher.suites"},
		{"bad mapping rules", Settings{"ssl.keystore.location": e.keystore, "ssl.principal.mapping.rules": "RULE:nope"}, "ssl.principal.mapping.rules"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewServerTLS(c.s, "SSL", nil)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
		})
	}
}

func TestServerTLSClientAuthRequired(t *testing.T) {
	e := newEnv(t)
	st := newServerTLS(t, Settings{
		"ssl.keystore.location":       e.keystore,
		"ssl.truststore.location":     e.trustore,
		"ssl.client.auth":             "required",
		"ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT",
	}, nil)

	t.Run("no certificate", func(t *testing.T) {
		r := handshake(t, st.Config(), e.clientConfig())
		require.ErrorContains(t, r.serverErr, "didn't provide a certificate")
		require.Error(t, r.clientErr)
	})
	t.Run("no certificate, TLS 1.2", func(t *testing.T) {
		cli := e.clientConfig()
		cli.MaxVersion = tls.VersionTLS12
		r := handshake(t, st.Config(), cli)
		require.ErrorContains(t, r.serverErr, "didn't provide a certificate")
		require.Error(t, r.clientErr)
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		stranger := newCA(t, "other-ca").clientCert(t, pkix.Name{CommonName: "mallory"})
		r := handshake(t, st.Config(), forceCert(e.clientConfig(), stranger))
		require.ErrorContains(t, r.serverErr, "unknown authority")
		require.Error(t, r.clientErr)
	})
	t.Run("server certificate as client certificate", func(t *testing.T) {
		// Signed by the trusted CA but not for client authentication.
		r := handshake(t, st.Config(), forceCert(e.clientConfig(), e.server))
		require.ErrorContains(t, r.serverErr, "key usage")
	})
	for _, c := range []struct {
		name    string
		subject pkix.Name
		want    string
	}{
		{"default rule", pkix.Name{CommonName: "carol", Organization: []string{"Example"}, Country: []string{"US"}}, "User:CN=carol,O=Example,C=US"},
		{"service user", pkix.Name{CommonName: "ServiceUser", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Unknown"}}, "User:ServiceUser"},
		{
			"second rule",
			pkix.Name{CommonName: "adminUser", OrganizationalUnit: []string{"Admin"}, Organization: []string{"Unknown"}, Locality: []string{"Unknown"}, Province: []string{"Unknown"}, Country: []string{"Unknown"}},
			"User:adminuser@admin",
		},
	} {
		for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			t.Run(c.name+" "+tls.VersionName(version), func(t *testing.T) {
				client := e.ca.clientCert(t, c.subject)
				cli := e.clientConfig(client)
				cli.MaxVersion = version
				r := handshake(t, st.Config(), cli)
				require.NoError(t, r.serverErr)
				require.NoError(t, r.clientErr)
				require.Equal(t, version, r.server.Version)
				require.NotEmpty(t, r.server.VerifiedChains)
				p, err := st.Principal(r.server)
				require.NoError(t, err)
				require.Equal(t, c.want, p)
			})
		}
	}
}

func TestServerTLSClientAuthRequested(t *testing.T) {
	e := newEnv(t)
	st := newServerTLS(t, Settings{
		"ssl.keystore.location":   e.keystore,
		"ssl.truststore.location": e.trustore,
		"ssl.client.auth":         "Requested",
	}, nil)
	require.Equal(t, ClientAuthRequested, st.ClientAuth())

	// No certificate: the handshake succeeds, the principal is anonymous.
	r := handshake(t, st.Config(), e.clientConfig())
	require.NoError(t, r.serverErr)
	require.NoError(t, r.clientErr)
	p, err := st.Principal(r.server)
	require.NoError(t, err)
	require.Equal(t, Anonymous, p)

	// A trusted certificate: its mapped subject.
	client := e.ca.clientCert(t, pkix.Name{CommonName: "dave", OrganizationalUnit: []string{"ops"}})
	r = handshake(t, st.Config(), e.clientConfig(client))
	require.NoError(t, r.serverErr)
	require.NoError(t, r.clientErr)
	p, err = st.Principal(r.server)
	require.NoError(t, err)
	require.Equal(t, "User:CN=dave,OU=ops", p)

	// A certificate given is verified: an untrusted one fails.
	stranger := newCA(t, "other-ca").clientCert(t, pkix.Name{CommonName: "mallory"})
	r = handshake(t, st.Config(), forceCert(e.clientConfig(), stranger))
	require.ErrorContains(t, r.serverErr, "unknown authority")
	require.Error(t, r.clientErr)
}

func TestServerTLSClientAuthNone(t *testing.T) {
	e := newEnv(t)
	st := newServerTLS(t, Settings{"ssl.keystore.location": e.keystore}, nil)
	// A client certificate is not asked for, so none is sent and the
	// principal is anonymous.
	client := e.ca.clientCert(t, pkix.Name{CommonName: "erin"})
	r := handshake(t, st.Config(), e.clientConfig(client))
	require.NoError(t, r.serverErr)
	require.NoError(t, r.clientErr)
	require.Empty(t, r.server.PeerCertificates)
	p, err := st.Principal(r.server)
	require.NoError(t, err)
	require.Equal(t, Anonymous, p)
}

func TestServerTLSPrincipalNoMatchingRule(t *testing.T) {
	e := newEnv(t)
	st := newServerTLS(t, Settings{
		"ssl.keystore.location":       e.keystore,
		"ssl.truststore.location":     e.trustore,
		"ssl.client.auth":             "required",
		"ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
	}, nil)
	client := e.ca.clientCert(t, pkix.Name{CommonName: "frank", OrganizationalUnit: []string{"Admin"}})
	r := handshake(t, st.Config(), e.clientConfig(client))
	require.NoError(t, r.serverErr)
	_, err := st.Principal(r.server)
	require.Error(t, err)
}

func TestPrincipalUnverifiedPeer(t *testing.T) {
	e := newEnv(t)
	st := newServerTLS(t, Settings{"ssl.keystore.location": e.keystore}, nil)
	// A peer certificate that was not verified gives no principal.
	client := e.ca.clientCert(t, pkix.Name{CommonName: "gina"})
	p, err := st.Principal(tls.ConnectionState{PeerCertificates: []*x509.Certificate{client.cert}})
	require.NoError(t, err)
	require.Equal(t, Anonymous, p)
	p, err = st.Principal(tls.ConnectionState{})
	require.NoError(t, err)
	require.Equal(t, Anonymous, p)
}

func TestServerTLSVersions(t *testing.T) {
	e := newEnv(t)
	st := newServerTLS(t, Settings{"ssl.keystore.location": e.keystore}, nil)

	t.Run("TLS 1.1 client", func(t *testing.T) {
		cli := e.clientConfig()
		cli.MinVersion, cli.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
		r := handshake(t, st.Config(), cli)
		require.ErrorContains(t, r.serverErr, "unsupported versions")
		require.Error(t, r.clientErr)
	})
	t.Run("TLS 1.2 client", func(t *testing.T) {
		cli := e.clientConfig()
		cli.MaxVersion = tls.VersionTLS12
		r := handshake(t, st.Config(), cli)
		require.NoError(t, r.serverErr)
		require.NoError(t, r.clientErr)
		require.Equal(t, uint16(tls.VersionTLS12), r.client.Version)
	})

	only13 := newServerTLS(t, Settings{"ssl.keystore.location": e.keystore, "ssl.enabled.protocols": "TLSv1.3"}, nil)
	require.Equal(t, uint16(tls.VersionTLS13), only13.Config().MinVersion)
	t.Run("TLS 1.2 client, TLSv1.3 only", func(t *testing.T) {
		cli := e.clientConfig()
		cli.MaxVersion = tls.VersionTLS12
		r := handshake(t, only13.Config(), cli)
		require.ErrorContains(t, r.serverErr, "unsupported versions")
		require.Error(t, r.clientErr)
	})
	t.Run("TLS 1.3 client, TLSv1.3 only", func(t *testing.T) {
		r := handshake(t, only13.Config(), e.clientConfig())
		require.NoError(t, r.serverErr)
		require.NoError(t, r.clientErr)
		require.Equal(t, uint16(tls.VersionTLS13), r.client.Version)
	})

	only12 := newServerTLS(t, Settings{"ssl.keystore.location": e.keystore, "ssl.enabled.protocols": "TLSv1.2"}, nil)
	r := handshake(t, only12.Config(), e.clientConfig())
	require.NoError(t, r.serverErr)
	require.NoError(t, r.clientErr)
	require.Equal(t, uint16(tls.VersionTLS12), r.client.Version)
}

func TestServerTLSCipherSuites(t *testing.T) {
	e := newEnv(t)
	st := newServerTLS(t, Settings{
		"ssl.keystore.location": e.keystore,
		"ssl.cipher.suites":     "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	}, nil)
	cli := e.clientConfig()
	cli.MaxVersion = tls.VersionTLS12
	r := handshake(t, st.Config(), cli)
	require.NoError(t, r.serverErr)
	require.NoError(t, r.clientErr)
	require.Equal(t, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, r.client.CipherSuite)

	// A client offering none of them fails.
	cli = e.clientConfig()
	cli.MaxVersion = tls.VersionTLS12
	cli.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	r = handshake(t, st.Config(), cli)
	require.ErrorContains(t, r.serverErr, "cipher")
}

func TestServerTLSReloadsKeystore(t *testing.T) {
	e := newEnv(t)
	var w warnings
	st := newServerTLS(t, Settings{"ssl.keystore.location": e.keystore}, &w)
	cli := e.clientConfig()
	require.Equal(t, "server-1", servedCN(t, st, cli))
	// Unchanged: the same certificate again.
	require.Equal(t, "server-1", servedCN(t, st, cli))

	// A new certificate: the next handshake serves it.
	rewrite(t, e.keystore, keystorePEM(e.ca.serverCert(t, "server-2"), e.ca))
	require.Equal(t, "server-2", servedCN(t, st, cli))
	require.Equal(t, "server-2", servedCN(t, st, cli))
	require.Zero(t, w.count())

	// Garbage: the previous certificate is kept and warn says so.
	rewrite(t, e.keystore, []byte("-----BEGIN GARBAGE-----\n"))
	require.Equal(t, "server-2", servedCN(t, st, cli))
	require.Equal(t, 1, w.count())
	w.mu.Lock()
	require.Error(t, w.errs[0])
	require.NotEmpty(t, w.msgs[0])
	w.mu.Unlock()
	require.Equal(t, "server-2", servedCN(t, st, cli))

	// Fixed: the new certificate is served.
	rewrite(t, e.keystore, keystorePEM(e.ca.serverCert(t, "server-3"), e.ca))
	require.Equal(t, "server-3", servedCN(t, st, cli))

	// Handshakes on a Config taken before the change see it too.
	cfg := st.Config()
	rewrite(t, e.keystore, keystorePEM(e.ca.serverCert(t, "server-4"), e.ca))
	r := handshake(t, cfg, cli)
	require.NoError(t, r.serverErr)
	require.Equal(t, "server-4", r.client.PeerCertificates[0].Subject.CommonName)
}

func TestServerTLSKeystoreRemoved(t *testing.T) {
	e := newEnv(t)
	var w warnings
	st := newServerTLS(t, Settings{"ssl.keystore.location": e.keystore}, &w)
	cli := e.clientConfig()
	fi, err := os.Stat(e.keystore)
	require.NoError(t, err)
	require.NoError(t, os.Remove(e.keystore))
	require.Equal(t, "server-1", servedCN(t, st, cli))
	require.Equal(t, 1, w.count())
	w.mu.Lock()
	require.ErrorIs(t, w.errs[0], os.ErrNotExist)
	w.mu.Unlock()

	// Back: served again.
	writeFile(t, e.keystore, keystorePEM(e.ca.serverCert(t, "server-2"), e.ca))
	next := fi.ModTime().Add(time.Hour)
	require.NoError(t, os.Chtimes(e.keystore, next, next))
	require.Equal(t, "server-2", servedCN(t, st, cli))
}

func TestServerTLSKeystoreKeyMismatchKeepsOld(t *testing.T) {
	e := newEnv(t)
	var w warnings
	st := newServerTLS(t, Settings{"ssl.keystore.location": e.keystore}, &w)
	cli := e.clientConfig()
	// A certificate with another certificate's key does not load.
	other := e.ca.serverCert(t, "server-2")
	bad := append(append([]byte{}, e.server.keyPEM...), other.certPEM...)
	rewrite(t, e.keystore, bad)
	require.Equal(t, "server-1", servedCN(t, st, cli))
	require.Equal(t, 1, w.count())
}

func TestServerTLSReloadsTruststore(t *testing.T) {
	e := newEnv(t)
	var w warnings
	st := newServerTLS(t, Settings{
		"ssl.keystore.location":   e.keystore,
		"ssl.truststore.location": e.trustore,
		"ssl.client.auth":         "required",
	}, &w)
	ca2 := newCA(t, "ca-2")
	alice := e.ca.clientCert(t, pkix.Name{CommonName: "alice"})
	bob := ca2.clientCert(t, pkix.Name{CommonName: "bob"})

	r := handshake(t, st.Config(), e.clientConfig(alice))
	require.NoError(t, r.serverErr)
	r = handshake(t, st.Config(), forceCert(e.clientConfig(), bob))
	require.ErrorContains(t, r.serverErr, "unknown authority")

	// Trust ca-2 only: bob gets in, alice no longer does.
	rewrite(t, e.trustore, ca2.certPEM)
	r = handshake(t, st.Config(), e.clientConfig(bob))
	require.NoError(t, r.serverErr)
	p, err := st.Principal(r.server)
	require.NoError(t, err)
	require.Equal(t, "User:CN=bob", p)
	r = handshake(t, st.Config(), forceCert(e.clientConfig(), alice))
	require.ErrorContains(t, r.serverErr, "unknown authority")

	// A truststore with no certificate keeps the previous one.
	rewrite(t, e.trustore, []byte("empty\n"))
	r = handshake(t, st.Config(), e.clientConfig(bob))
	require.NoError(t, r.serverErr)
	require.Equal(t, 1, w.count())
}

// doc.go: ServerTLS.mu "is held while a changed file is read and parsed
// ..., never while calling out". The warn callback is a call out; a
// callback that takes the lock again (say, by asking for the current
// config) would deadlock.
func TestServerTLSWarnNotUnderLock(t *testing.T) {
	e := newEnv(t)
	var st *ServerTLS
	var mu sync.Mutex
	var free []bool
	warn := func(string, error) {
		ok := st.mu.TryLock()
		if ok {
			st.mu.Unlock()
		}
		mu.Lock()
		free = append(free, ok)
		mu.Unlock()
	}
	var err error
	st, err = NewServerTLS(Settings{"ssl.keystore.location": e.keystore}, "SSL", warn)
	require.NoError(t, err)
	rewrite(t, e.keystore, []byte("garbage"))
	require.Equal(t, "server-1", servedCN(t, st, e.clientConfig()))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []bool{true}, free)
}

func TestServerTLSInlineNeverReloads(t *testing.T) {
	e := newEnv(t)
	var w warnings
	st := newServerTLS(t, Settings{
		"ssl.keystore.certificate.chain": string(e.server.certPEM),
		"ssl.keystore.key":               string(e.server.keyPEM),
	}, &w)
	// The keystore file is not the listener's: rewriting it changes
	// nothing.
	rewrite(t, e.keystore, []byte("garbage"))
	require.Equal(t, "server-1", servedCN(t, st, e.clientConfig()))
	require.Equal(t, "server-1", servedCN(t, st, e.clientConfig()))
	require.Zero(t, w.count())
}

// Handshakes running at once share the ServerTLS (run with -race).
func TestServerTLSConcurrentHandshakes(t *testing.T) {
	e := newEnv(t)
	st := newServerTLS(t, Settings{"ssl.keystore.location": e.keystore}, nil)
	cfg := st.Config()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	const n = 4
	deadline := time.Now().Add(30 * time.Second) // a safety net only
	errs := make(chan error, 2*n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			c, err := ln.Accept()
			if err != nil {
				errs <- err
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(deadline)
				tc := tls.Server(c, cfg)
				err := tc.Handshake()
				if err == nil {
					_, err = tc.Write([]byte{1})
				}
				errs <- err
			}()
		}
	}()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(deadline)
			tc := tls.Client(c, e.clientConfig())
			err = tc.Handshake()
			if err == nil {
				var b [1]byte
				_, err = io.ReadFull(tc, b[:])
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
