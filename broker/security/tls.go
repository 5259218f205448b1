package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tlsVersions parses ssl.enabled.protocols into a version range.
func tlsVersions(v string) (lo, hi uint16, err error) {
	for _, p := range strings.Split(v, ",") {
		var ver uint16
		switch strings.TrimSpace(p) {
		case "":
			continue
		case "TLSv1.2":
			ver = tls.VersionTLS12
		case "TLSv1.3":
			ver = tls.VersionTLS13
		case "TLSv1", "TLSv1.1", "SSLv3", "SSLv2Hello":
			return 0, 0, fmt.Errorf("%s is refused: TLSv1.2 is the oldest version served", strings.TrimSpace(p))
		default:
			return 0, 0, fmt.Errorf("%q is not TLSv1.2 or TLSv1.3", strings.TrimSpace(p))
		}
		if lo == 0 || ver < lo {
			lo = ver
		}
		hi = max(hi, ver)
	}
	if lo == 0 {
		return 0, 0, fmt.Errorf("no protocol enabled")
	}
	return lo, hi, nil
}

// cipherSuites parses ssl.cipher.suites (IANA names) into Go's ids;
// nil means Go's defaults. Insecure suites are refused.
func cipherSuites(v string) ([]uint16, error) {
	byName := map[string]uint16{}
	for _, s := range tls.CipherSuites() {
		byName[s.Name] = s.ID
	}
	var ids []uint16
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		id, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("%q is not a secure TLS 1.2 cipher suite Go implements", n)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// ClientAuth is ssl.client.auth.
type ClientAuth string

const (
	ClientAuthNone      ClientAuth = "none"
	ClientAuthRequested ClientAuth = "requested"
	ClientAuthRequired  ClientAuth = "required"
)

// ServerTLS is one listener's TLS: its certificate and trusted CAs,
// read from PEM files and read again when a file changes (checked at
// each handshake, a few stat calls), so certificates rotate without a
// restart. A file that does not parse after a change keeps the last
// good configuration (Warn says so) until it is fixed.
type ServerTLS struct {
	warn func(msg string, err error)

	keystore, truststore string // file paths, or "" when inline (no reload)
	certPEM, keyPEM      []byte // inline
	trustPEM             []byte // inline
	auth                 ClientAuth
	minVer, maxVer       uint16
	suites               []uint16
	Mapper               *PrincipalMapper

	mu struct {
		sync.Mutex
		cfg               *tls.Config
		keyStamp, trStamp fileStamp
		lastErrAt         time.Time
		// badKey and badTr are the stamps of files that failed to load,
		// and badErr why: they are not read again until they change.
		badKey, badTr fileStamp
		badErr        error
	}
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

// CheckServerTLS checks listener's TLS settings without reading its
// key and trust stores (config validation does no I/O; NewServerTLS
// reads them at start and names a bad one).
func CheckServerTLS(s Settings, listener string) error {
	_, err := tlsConfig(s, listener)
	return err
}

// NewServerTLS builds listener's TLS from its settings (ssl.* with
// listener.name.<name>. overrides) and reads its stores. warn reports a
// failed reload.
func NewServerTLS(s Settings, listener string, warn func(string, error)) (*ServerTLS, error) {
	t, err := tlsConfig(s, listener)
	if err != nil {
		return nil, err
	}
	t.warn = warn
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reloadLocked(true); err != nil {
		return nil, fmt.Errorf("listener %s: %w", listener, err)
	}
	return t, nil
}

// tlsConfig parses listener's TLS settings.
func tlsConfig(s Settings, listener string) (*ServerTLS, error) {
	get := func(k string) string { return s.For(listener, k) }
	t := &ServerTLS{auth: ClientAuth(strings.ToLower(get("ssl.client.auth")))}
	var err error
	if t.minVer, t.maxVer, err = tlsVersions(get("ssl.enabled.protocols")); err != nil {
		return nil, fmt.Errorf("ssl.enabled.protocols: %w", err)
	}
	if t.suites, err = cipherSuites(get("ssl.cipher.suites")); err != nil {
		return nil, fmt.Errorf("ssl.cipher.suites: %w", err)
	}
	if t.Mapper, err = ParseMappingRules(get("ssl.principal.mapping.rules")); err != nil {
		return nil, fmt.Errorf("ssl.principal.mapping.rules: %w", err)
	}
	t.keystore = get("ssl.keystore.location")
	chain, key := get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
	switch {
	case t.keystore != "" && (chain != "" || key != ""):
		return nil, fmt.Errorf("listener %s: give ssl.keystore.location or ssl.keystore.certificate.chain and ssl.keystore.key, not both", listener)
	case t.keystore == "" && (chain == "" || key == ""):
		return nil, fmt.Errorf("listener %s is TLS: it needs ssl.keystore.location (or ssl.keystore.certificate.chain and ssl.keystore.key)", listener)
	}
	t.certPEM, t.keyPEM = []byte(chain), []byte(key)
	t.truststore = get("ssl.truststore.location")
	t.trustPEM = []byte(get("ssl.truststore.certificates"))
	if t.truststore != "" && len(t.trustPEM) > 0 {
		return nil, fmt.Errorf("listener %s: give ssl.truststore.location or ssl.truststore.certificates, not both", listener)
	}
	if t.auth != ClientAuthNone && t.truststore == "" && len(t.trustPEM) == 0 {
		return nil, fmt.Errorf("listener %s: ssl.client.auth=%s needs a truststore (ssl.truststore.location)", listener, t.auth)
	}
	return t, nil
}

// Config is the tls.Config a listener serves with: each handshake takes
// the newest certificates.
func (t *ServerTLS) Config() *tls.Config {
	return &tls.Config{
		MinVersion: t.minVer, MaxVersion: t.maxVer,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return t.current(), nil },
	}
}

// ClientAuth is the listener's ssl.client.auth.
func (t *ServerTLS) ClientAuth() ClientAuth { return t.auth }

// ClientConfig is the configuration to dial serverName with as the
// other end of a mutual TLS connection (the peer network): this
// listener's newest certificate, and its truststore's CAs to verify the
// server's certificate (its IP or DNS names must cover serverName).
func (t *ServerTLS) ClientConfig(serverName string) *tls.Config {
	cur := t.current()
	return &tls.Config{
		Certificates: cur.Certificates, RootCAs: cur.ClientCAs, ServerName: serverName,
		MinVersion: t.minVer, MaxVersion: t.maxVer, CipherSuites: t.suites,
	}
}

func (t *ServerTLS) current() *tls.Config {
	t.mu.Lock()
	err := t.reloadLocked(false)
	report := err != nil && t.warn != nil && time.Since(t.mu.lastErrAt) > 10*time.Second
	if report {
		t.mu.lastErrAt = time.Now()
	}
	cfg := t.mu.cfg
	t.mu.Unlock()
	if report { // outside the lock: warn may do anything
		t.warn("TLS files changed but do not load; serving the previous ones", err)
	}
	return cfg
}

// reloadLocked reads the files again if they changed (or force).
func (t *ServerTLS) reloadLocked(force bool) error {
	var ks, ts fileStamp
	var err error
	if t.keystore != "" {
		if ks, err = stamp(t.keystore); err != nil {
			return fmt.Errorf("ssl.keystore.location: %w", err)
		}
	}
	if t.truststore != "" {
		if ts, err = stamp(t.truststore); err != nil {
			return fmt.Errorf("ssl.truststore.location: %w", err)
		}
	}
	if !force && ks == t.mu.keyStamp && ts == t.mu.trStamp {
		return nil
	}
	if !force && t.mu.badErr != nil && ks == t.mu.badKey && ts == t.mu.badTr {
		return t.mu.badErr
	}
	cfg, err := t.build()
	if err != nil {
		t.mu.badKey, t.mu.badTr, t.mu.badErr = ks, ts, err
		return err
	}
	t.mu.cfg, t.mu.keyStamp, t.mu.trStamp, t.mu.badErr = cfg, ks, ts, nil
	return nil
}

// build reads the stores into a tls.Config.
func (t *ServerTLS) build() (*tls.Config, error) {
	cert, err := t.loadCert()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   t.minVer, MaxVersion: t.maxVer,
		CipherSuites: t.suites,
		ClientAuth:   tls.NoClientCert,
	}
	if t.auth != ClientAuthNone {
		pool, err := t.loadTrust()
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if t.auth == ClientAuthRequired {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return cfg, nil
}

func (t *ServerTLS) loadCert() (tls.Certificate, error) {
	certPEM, keyPEM := t.certPEM, t.keyPEM
	if t.keystore != "" {
		raw, err := os.ReadFile(t.keystore)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		certPEM, keyPEM = splitPEM(raw)
		if len(certPEM) == 0 || len(keyPEM) == 0 {
			return tls.Certificate{}, fmt.Errorf("ssl.keystore.location %s: want a PEM private key and certificate chain in one file", t.keystore)
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("keystore: %w", err)
	}
	return cert, nil
}

func (t *ServerTLS) loadTrust() (*x509.CertPool, error) {
	raw := t.trustPEM
	if t.truststore != "" {
		var err error
		if raw, err = os.ReadFile(t.truststore); err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, errors.New("truststore: no PEM certificate in it")
	}
	return pool, nil
}

// splitPEM separates a keystore file's certificates from its key.
func splitPEM(raw []byte) (certs, key []byte) {
	for {
		var b *pem.Block
		b, raw = pem.Decode(raw)
		if b == nil {
			return certs, key
		}
		if b.Type == "CERTIFICATE" {
			certs = append(certs, pem.EncodeToMemory(b)...)
		} else if strings.HasSuffix(b.Type, "PRIVATE KEY") {
			key = append(key, pem.EncodeToMemory(b)...)
		}
	}
}

// Principal is the principal of a finished TLS handshake: the mapped
// subject of a verified client certificate, else Anonymous.
func (t *ServerTLS) Principal(cs tls.ConnectionState) (string, error) {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return Anonymous, nil
	}
	dn, err := SubjectDN(cs.PeerCertificates[0])
	if err != nil {
		return "", err
	}
	name, err := t.Mapper.Map(dn)
	if err != nil {
		return "", err
	}
	return "User:" + name, nil
}

// PeerSecurityProtocol is the setting that secures a cluster's peer
// network, and PeerListener the listener name its ssl.* overrides use
// (listener.name.peer.).
const (
	PeerSecurityProtocol = "shoal.peer.security.protocol"
	PeerPrincipals       = "shoal.peer.principals"
	PeerListener         = "PEER"
)

// ParsePeerPrincipals parses shoal.peer.principals: id=principal,...
func ParsePeerPrincipals(v string) (map[uint64]string, error) {
	m := map[uint64]string{}
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		id, p, ok := strings.Cut(e, "=")
		n, err := strconv.ParseUint(strings.TrimSpace(id), 10, 64)
		p = strings.TrimSpace(p)
		if !ok || err != nil || n == 0 || !strings.Contains(p, ":") {
			return nil, fmt.Errorf("%q is not node-id=Type:name", e)
		}
		if _, dup := m[n]; dup {
			return nil, fmt.Errorf("node %d is given twice", n)
		}
		m[n] = p
	}
	return m, nil
}

// PeerTLS says whether s secures the peer network
// (shoal.peer.security.protocol SSL, in any case, as its check accepts).
func PeerTLS(s Settings) bool {
	return strings.EqualFold(s.For("", PeerSecurityProtocol), "SSL")
}

// PeerSettings are s with ssl.client.auth required on the peer
// listener: peers always authenticate each other.
func PeerSettings(s Settings) Settings {
	out := maps.Clone(s)
	if out == nil {
		out = Settings{}
	}
	out["listener.name.peer.ssl.client.auth"] = string(ClientAuthRequired)
	return out
}
