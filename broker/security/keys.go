package security

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Key is one security config: Kafka's name, its default, and what it
// means here. Each may also be set for one listener with Kafka's prefix
// listener.name.<name>.<key> (the name in lower case), which wins over
// the plain key on that listener.
type Key struct {
	Name string
	Def  string
	Doc  string
	// Check, if set, validates a value.
	Check func(v string) error
	// Sensitive values are never logged or described (passwords, keys).
	Sensitive bool
}

// StandardAuthorizer is Kafka's (KRaft) authorizer class name.
const StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// Keys is every security config, sorted by name.
var Keys = func() []Key {
	ks := []Key{
		{Name: "ssl.keystore.type", Def: "PEM", Doc: "The keystore's format. Only PEM is read.", Check: onlyPEM},
		{Name: "ssl.keystore.location", Doc: "A PEM file holding the listener's private key and its certificate chain (leaf first). Re-read when it changes."},
		{Name: "ssl.keystore.certificate.chain", Doc: "The certificate chain in PEM, given inline instead of ssl.keystore.location."},
		{Name: "ssl.keystore.key", Sensitive: true, Doc: "The private key in unencrypted PEM (PKCS#8, PKCS#1 or SEC 1), given inline instead of ssl.keystore.location."},
		{Name: "ssl.key.password", Sensitive: true, Doc: "Not supported: keys must be unencrypted PEM (protect the file instead).",
			Check: func(string) error {
				return fmt.Errorf("encrypted PEM keys are not supported; give an unencrypted key file readable only by the broker")
			}},
		{Name: "ssl.truststore.type", Def: "PEM", Doc: "The truststore's format. Only PEM is read.", Check: onlyPEM},
		{Name: "ssl.truststore.location", Doc: "A PEM file of the CA certificates client certificates are verified against (mTLS). Re-read when it changes."},
		{Name: "ssl.truststore.certificates", Doc: "The CA certificates in PEM, given inline instead of ssl.truststore.location."},
		{Name: "ssl.client.auth", Def: "none", Doc: "Client certificates: none (not asked for), requested (verified if given), required (a connection without a valid one fails its handshake).",
			Check: oneOf("none", "requested", "required")},
		{Name: "ssl.enabled.protocols", Def: "TLSv1.2,TLSv1.3", Doc: "The TLS versions accepted: TLSv1.2 and TLSv1.3. Older versions are refused.",
			Check: func(v string) error { _, _, err := tlsVersions(v); return err }},
		{Name: "ssl.protocol", Def: "TLSv1.3", Doc: "Accepted for compatibility (TLSv1.2, TLSv1.3 or TLS); ssl.enabled.protocols decides.",
			Check: oneOf("TLSv1.2", "TLSv1.3", "TLS")},
		{Name: "ssl.cipher.suites", Doc: "The TLS 1.2 cipher suites, by IANA name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...); empty means Go's secure defaults. TLS 1.3 suites are not configurable.",
			Check: func(v string) error { _, err := cipherSuites(v); return err }},
		{Name: "ssl.principal.mapping.rules", Def: "DEFAULT", Doc: "How a client certificate's subject DN becomes the user name of its principal: DEFAULT (the DN in RFC 2253 form) or RULE:pattern/replacement/[LU], comma-separated, the first matching rule winning.",
			Check: func(v string) error { _, err := ParseMappingRules(v); return err }},
		{Name: "sasl.enabled.mechanisms", Def: "SCRAM-SHA-256,SCRAM-SHA-512", Doc: "The SASL mechanisms a SASL_PLAINTEXT or SASL_SSL listener accepts: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER (Kafka's default, GSSAPI, is not served)."},
		{Name: "sasl.oauthbearer.jwks.endpoint.url", Doc: "OAUTHBEARER: the JWKS whose keys sign valid tokens: an https URL, or a file (path or file:// URL) read again when it changes."},
		{Name: "sasl.oauthbearer.jwks.endpoint.refresh.ms", Def: "3600000", Doc: "OAUTHBEARER: how often an https JWKS is fetched again (also when a token names an unknown key, at most every 10 s).", Check: nonNegativeInt},
		{Name: "sasl.oauthbearer.clock.skew.seconds", Def: "30", Doc: "OAUTHBEARER: the clock difference allowed when checking exp and nbf (at most a day).",
			Check: func(v string) error {
				if err := nonNegativeInt(v); err != nil {
					return err
				}
				if n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64); n > 86400 {
					return fmt.Errorf("%s seconds is more than a day", v)
				}
				return nil
			}},
		{Name: "sasl.oauthbearer.expected.audience", Doc: "OAUTHBEARER: comma-separated audiences; a token's aud must hold one of them. Empty: not checked."},
		{Name: "sasl.oauthbearer.expected.issuer", Doc: "OAUTHBEARER: the iss a token must have. Empty: not checked."},
		{Name: "sasl.oauthbearer.sub.claim.name", Def: "sub", Doc: "OAUTHBEARER: the claim whose value is the principal's name (User:<value>)."},
		{Name: "sasl.oauthbearer.scope.claim.name", Def: "scope", Doc: "OAUTHBEARER: accepted for compatibility; scopes are not checked."},
		{Name: "shoal.sasl.oauthbearer.unsecured.enable", Def: "false", Doc: "OAUTHBEARER: also accept unsigned tokens (alg none), as Kafka's development validator does. Never in production.",
			Check: oneOf("true", "false")},
		{Name: PeerSecurityProtocol, Def: "PLAINTEXT", Doc: "The cluster's peer (raft) network: PLAINTEXT, or SSL for mutual TLS, each broker proving itself with its certificate (listener.name.peer.ssl.* over the ssl.* settings; ssl.client.auth is always required there) and accepting only peers whose certificate's principal (ssl.principal.mapping.rules) is their node's in shoal.peer.principals, or without it among super.users.",
			Check: oneOf("PLAINTEXT", "SSL")},
		{Name: PeerPrincipals, Doc: "With shoal.peer.security.protocol=SSL, each voter's certificate principal, comma-separated id=principal (1=User:CN=broker-1,2=User:CN=broker-2,...): a peer connection for node N must present N's certificate. Unset: any principal in super.users is accepted as any node.",
			Check: func(v string) error { _, err := ParsePeerPrincipals(v); return err }},
		{Name: "super.users", Doc: "Principals allowed everything, semicolon-separated (User:admin;User:CN=ops). With the authorizer off, when set, they are also the only ones who may call DescribeUserScramCredentials and AlterUserScramCredentials (Kafka without an authorizer lets anyone).",
			Check: func(v string) error { _, err := ParseSuperUsers(v); return err }},
		{Name: "authorizer.class.name", Doc: "Turns on ACL authorization: acl, or Kafka's names for its authorizer (org.apache.kafka.metadata.authorizer.StandardAuthorizer, kafka.security.authorizer.AclAuthorizer), which all mean Shoal's implementation of StandardAuthorizer's semantics. Empty (the default, as in Kafka): every client may do everything.",
			Check: oneOf("", "acl", StandardAuthorizer, "kafka.security.authorizer.AclAuthorizer")},
		{Name: "allow.everyone.if.no.acl.found", Def: "false", Doc: "With the authorizer on, allow a request on a resource no ACL at all covers (Kafka's opt-in); off, no matching ACL denies.",
			Check: oneOf("true", "false")},
		{Name: "shoal.sasl.plain.allow.plaintext", Def: "false", Doc: "Allow PLAIN on a SASL_PLAINTEXT listener (passwords in the clear); off, PLAIN there stops startup.",
			Check: oneOf("true", "false")},
		{Name: "connections.max.reauth.ms", Def: "0", Doc: "KIP-368: a SASL session's lifetime, told to the client in SaslAuthenticate; it must re-authenticate before then, or its next request closes the connection. 0: sessions do not expire.",
			Check: nonNegativeInt},
		{Name: "connection.failed.authentication.delay.ms", Def: "100", Doc: "How long a failed authentication's answer is held back before the connection closes (slows password guessing).",
			Check: nonNegativeInt},
		{Name: "ssl.endpoint.identification.algorithm", Def: "https", Doc: "Accepted for compatibility; a broker verifies no server hostnames (Shoal has no inter-broker TLS yet)."},
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
	return ks
}()

var keyByName = func() map[string]*Key {
	m := map[string]*Key{}
	for i := range Keys {
		m[Keys[i].Name] = &Keys[i]
	}
	return m
}()

// KeyNamed is the security config called name, or nil.
func KeyNamed(name string) *Key { return keyByName[name] }

func nonNegativeInt(v string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a non-negative integer", v)
	}
	return nil
}

// Millis is an integer key's value on listener.
func (s Settings) Millis(listener, key string) int64 {
	n, _ := strconv.ParseInt(s.For(listener, key), 10, 64)
	return n
}

func onlyPEM(v string) error {
	if !strings.EqualFold(strings.TrimSpace(v), "PEM") {
		return fmt.Errorf("%q: only PEM key and trust stores are read", v)
	}
	return nil
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, ok := range vals {
			if strings.EqualFold(strings.TrimSpace(v), ok) {
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(vals, ", "))
	}
}

// IsKey reports whether name is a security config, plain or with a
// listener.name.<name>. prefix.
func IsKey(name string) bool {
	_, k := splitKey(name)
	return k != nil
}

// splitKey returns the listener a prefixed name is for ("" if none)
// and its Key.
func splitKey(name string) (listener string, k *Key) {
	if rest, ok := strings.CutPrefix(name, "listener.name."); ok {
		l, key, ok := strings.Cut(rest, ".")
		if !ok || l == "" {
			return "", nil
		}
		return strings.ToUpper(l), keyByName[key]
	}
	return "", keyByName[name]
}

// CheckValue validates one security config.
func CheckValue(name, value string) error {
	_, k := splitKey(name)
	if k == nil {
		return fmt.Errorf("unknown security config %q", name)
	}
	if k.Check != nil {
		return k.Check(value)
	}
	return nil
}

// Settings are the security configs as given (server.properties keys).
type Settings map[string]string

// For returns the value of key on listener: the listener's override,
// else the plain key, else the default.
func (s Settings) For(listener, key string) string {
	if v, ok := s["listener.name."+strings.ToLower(listener)+"."+key]; ok {
		return strings.TrimSpace(v)
	}
	if v, ok := s[key]; ok {
		return strings.TrimSpace(v)
	}
	if k := keyByName[key]; k != nil {
		return k.Def
	}
	return ""
}

// Validate checks every value and that each listener prefix names one
// of listeners.
func (s Settings) Validate(listeners map[string]bool) error {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		l, k := splitKey(n)
		if k == nil {
			return fmt.Errorf("unknown security config %q", n)
		}
		if l != "" && strings.Contains(n, "listener.name."+l+".") && strings.ToLower(l) != l {
			return fmt.Errorf("%s: the listener name in a listener.name. prefix is in lower case (listener.name.%s.)", n, strings.ToLower(l))
		}
		if l != "" && !listeners[l] {
			return fmt.Errorf("%s: no listener is named %s", n, l)
		}
		if k.Check != nil {
			if err := k.Check(s[n]); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
		}
	}
	return nil
}

// ParseSuperUsers parses super.users: principals (type:name) separated
// by semicolons.
func ParseSuperUsers(v string) (map[string]bool, error) {
	m := map[string]bool{}
	for _, p := range strings.Split(v, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		typ, name, ok := strings.Cut(p, ":")
		if !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("%q is not a principal (User:name)", p)
		}
		m[p] = true
	}
	return m, nil
}
