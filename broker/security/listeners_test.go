package security

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseEndpoints(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Endpoint
	}{
		{"PLAINTEXT://:9092", []Endpoint{{Name: "PLAINTEXT", Host: "", Port: 9092}}},
		// A bare host:port is one PLAINTEXT listener.
		{"localhost:9092", []Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}}},
		{":9092", []Endpoint{{Name: "PLAINTEXT", Host: "", Port: 9092}}},
		// Names are upper-cased, entries trimmed, empty entries skipped.
		{
			" plaintext://broker1:9092 , Internal://10.0.0.1:9093,ssl://:9094, ",
			[]Endpoint{
				{Name: "PLAINTEXT", Host: "broker1", Port: 9092},
				{Name: "INTERNAL", Host: "10.0.0.1", Port: 9093},
				{Name: "SSL", Host: "", Port: 9094},
			},
		},
		{"SASL_SSL://[::1]:9095", []Endpoint{{Name: "SASL_SSL", Host: "::1", Port: 9095}}},
		{"[::]:9092", []Endpoint{{Name: "PLAINTEXT", Host: "::", Port: 9092}}},
		{"MY-LISTENER_2://h:1", []Endpoint{{Name: "MY-LISTENER_2", Host: "h", Port: 1}}},
		// Port 0 (a free port) may be given more than once.
		{
			"A://127.0.0.1:0,B://127.0.0.1:0",
			[]Endpoint{{Name: "A", Host: "127.0.0.1", Port: 0}, {Name: "B", Host: "127.0.0.1", Port: 0}},
		},
		{"A://:65535", []Endpoint{{Name: "A", Host: "", Port: 65535}}},
	} {
		got, err := ParseEndpoints(c.in)
		require.NoError(t, err, "listeners %q", c.in)
		require.Equal(t, c.want, got, "listeners %q", c.in)
	}
}

func TestParseEndpointsErrors(t *testing.T) {
	for _, in := range []string{
		"",
		" , ,",
		// Duplicate names, also after upper-casing and for the bare form.
		"PLAINTEXT://:9092,PLAINTEXT://:9093",
		"plaintext://:9092,PLAINTEXT://:9093",
		"localhost:9092,PLAINTEXT://:9093",
		"localhost:9092,localhost:9093",
		// Duplicate ports, whatever the hosts.
		"A://:9092,B://:9092",
		"A://127.0.0.1:9092,B://10.0.0.1:9092",
		// Not NAME://host:port.
		"SSL://host",
		"SSL://",
		"host",
		"SSL://::1:9093",
		"SSL://host:",
		"SSL://host:abc",
		"SSL://host:-1",
		"SSL://host:65536",
		"://:9092",
		"BAD.NAME://:9092",
		"BAD NAME://:9092",
	} {
		_, err := ParseEndpoints(in)
		require.Error(t, err, "listeners %q", in)
	}
}

func TestEndpointAddrString(t *testing.T) {
	for _, c := range []struct {
		e          Endpoint
		addr, text string
	}{
		{Endpoint{Name: "PLAINTEXT", Host: "", Port: 9092}, ":9092", "PLAINTEXT://:9092"},
		{Endpoint{Name: "SSL", Host: "broker", Port: 9093}, "broker:9093", "SSL://broker:9093"},
		{Endpoint{Name: "SSL", Host: "::1", Port: 9093}, "[::1]:9093", "SSL://[::1]:9093"},
	} {
		require.Equal(t, c.addr, c.e.Addr())
		require.Equal(t, c.text, c.e.String())
		// String parses back to the same endpoint.
		got, err := ParseEndpoints(c.e.String())
		require.NoError(t, err)
		require.Equal(t, []Endpoint{c.e}, got)
	}
}

func TestProtocol(t *testing.T) {
	for _, c := range []struct {
		p         Protocol
		tls, sasl bool
	}{
		{Plaintext, false, false},
		{SSL, true, false},
		{SASLPlaintext, false, true},
		{SASLSSL, true, true},
		{Protocol("ssl"), false, false},
		{Protocol(""), false, false},
	} {
		require.Equal(t, c.tls, c.p.TLS(), "%q", c.p)
		require.Equal(t, c.sasl, c.p.SASL(), "%q", c.p)
	}
}

func TestParseProtocolMap(t *testing.T) {
	got, err := ParseProtocolMap("INTERNAL:PLAINTEXT, external : ssl ,Client:SASL_SSL,sasl:sasl_plaintext,")
	require.NoError(t, err)
	require.Equal(t, map[string]Protocol{
		"INTERNAL": Plaintext,
		"EXTERNAL": SSL,
		"CLIENT":   SASLSSL,
		"SASL":     SASLPlaintext,
	}, got)

	// The value replaces the default: a name not in it is not mapped.
	got, err = ParseProtocolMap("MTLS:SSL")
	require.NoError(t, err)
	require.Equal(t, map[string]Protocol{"MTLS": SSL}, got)

	got, err = ParseProtocolMap("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")
	require.NoError(t, err)
	require.Equal(t, DefaultProtocolMap(), got)
}

func TestParseProtocolMapErrors(t *testing.T) {
	for _, in := range []string{
		"",
		" , ",
		"A:TLS",
		"A:SASL",
		"A:",
		"A",
		":SSL",
		"A:SSL:SSL",
		"A.B:SSL",
		// Duplicates, also after upper-casing.
		"A:SSL,A:PLAINTEXT",
		"A:SSL,a:SSL",
	} {
		_, err := ParseProtocolMap(in)
		require.Error(t, err, "map %q", in)
	}
}

func TestDefaultProtocolMap(t *testing.T) {
	m := DefaultProtocolMap()
	require.Equal(t, map[string]Protocol{
		"PLAINTEXT":      Plaintext,
		"SSL":            SSL,
		"SASL_PLAINTEXT": SASLPlaintext,
		"SASL_SSL":       SASLSSL,
	}, m)
	// Each call is a fresh map.
	m["X"] = SSL
	delete(m, "SSL")
	require.Len(t, DefaultProtocolMap(), 4)
	require.Equal(t, SSL, DefaultProtocolMap()["SSL"])
}

// --- keys.go ---

func TestKeysTable(t *testing.T) {
	require.True(t, sort.SliceIsSorted(Keys, func(i, j int) bool { return Keys[i].Name < Keys[j].Name }))
	seen := map[string]bool{}
	for _, k := range Keys {
		require.False(t, seen[k.Name], "key %s twice", k.Name)
		seen[k.Name] = true
		require.NotEmpty(t, k.Doc, k.Name)
		require.True(t, IsKey(k.Name), k.Name)
		require.True(t, IsKey("listener.name.ssl."+k.Name), k.Name)
		// Every default passes its own check (ssl.key.password has none).
		if k.Check != nil && k.Def != "" {
			require.NoError(t, k.Check(k.Def), k.Name)
		}
	}
	for _, name := range []string{"ssl.keystore.key", "ssl.key.password"} {
		require.True(t, keyByName[name].Sensitive, name)
	}
	require.False(t, keyByName["ssl.keystore.location"].Sensitive)
}

func TestIsKey(t *testing.T) {
	for name, want := range map[string]bool{
		"ssl.keystore.location":                           true,
		"ssl.client.auth":                                 true,
		"ssl.principal.mapping.rules":                     true,
		"listener.name.ssl.ssl.client.auth":               true,
		"listener.name.internal.ssl.keystore.location":    true,
		"listener.name.ssl.ssl.principal.mapping.rules":   true,
		"ssl.unknown":                                     false,
		"ssl":                                             false,
		"":                                                false,
		"listener.name.ssl.ssl.unknown":                   false,
		"listener.name.ssl":                               false,
		"listener.name..ssl.client.auth":                  false,
		"listener.name.ssl.":                              false,
		"listener.security.protocol.map":                  false,
		"listener.name.ssl.listener.name.ssl.client.auth": false,
	} {
		require.Equal(t, want, IsKey(name), name)
	}
}

func TestCheckValue(t *testing.T) {
	for _, c := range []struct {
		name, value string
		ok          bool
	}{
		{"ssl.keystore.type", "PEM", true},
		{"ssl.keystore.type", " pem ", true},
		{"ssl.keystore.type", "JKS", false},
		{"ssl.keystore.type", "PKCS12", false},
		{"ssl.truststore.type", "PEM", true},
		{"ssl.truststore.type", "JKS", false},
		{"ssl.client.auth", "none", true},
		{"ssl.client.auth", "requested", true},
		{"ssl.client.auth", "REQUIRED", true},
		{"ssl.client.auth", "maybe", false},
		{"ssl.client.auth", "", false},
		{"ssl.enabled.protocols", "TLSv1.2,TLSv1.3", true},
		{"ssl.enabled.protocols", "TLSv1.3", true},
		{"ssl.enabled.protocols", " TLSv1.2 , ", true},
		{"ssl.enabled.protocols", "TLSv1.1", false},
		{"ssl.enabled.protocols", "TLSv1.2,TLSv1.1", false},
		{"ssl.enabled.protocols", "TLSv1", false},
		{"ssl.enabled.protocols", "SSLv3", false},
		{"ssl.enabled.protocols", "TLSv1.4", false},
		{"ssl.enabled.protocols", "", false},
		{"ssl.protocol", "TLSv1.3", true},
		{"ssl.protocol", "TLS", true},
		{"ssl.protocol", "tlsv1.2", true},
		{"ssl.protocol", "TLSv1.1", false},
		{"ssl.cipher.suites", "", true},
		{"ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", true},
		{"ssl.cipher.suites", "TLS_RSA_WITH_RC4_128_SHA", false},
		{"ssl.cipher.suites", "NOT_A_SUITE", false},
		{"ssl.key.password", "secret", false},
		{"ssl.principal.mapping.rules", "DEFAULT", true},
		{"ssl.principal.mapping.rules", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", true},
		{"ssl.principal.mapping.rules", "rule:x/y/", false},
		{"ssl.keystore.location", "/any/path", true},
		{"ssl.endpoint.identification.algorithm", "", true},
		// With a listener prefix the value is checked all the same.
		{"listener.name.ssl.ssl.client.auth", "required", true},
		{"listener.name.ssl.ssl.client.auth", "maybe", false},
		{"listener.name.internal.ssl.enabled.protocols", "TLSv1.1", false},
		// Not a security config.
		{"ssl.unknown", "x", false},
		{"listener.name.ssl.ssl.unknown", "x", false},
	} {
		err := CheckValue(c.name, c.value)
		if c.ok {
			require.NoError(t, err, "%s=%q", c.name, c.value)
		} else {
			require.Error(t, err, "%s=%q", c.name, c.value)
		}
	}
}

func TestSettingsFor(t *testing.T) {
	s := Settings{
		"ssl.client.auth":                          "requested",
		"listener.name.mtls.ssl.client.auth":       " required ",
		"ssl.keystore.location":                    " /plain.pem ",
		"listener.name.internal.ssl.cipher.suites": "",
	}
	// The listener's override wins over the plain key, the listener's
	// name matched in any case against the lower-case prefix.
	for _, l := range []string{"mtls", "MTLS", "Mtls"} {
		require.Equal(t, "required", s.For(l, "ssl.client.auth"), l)
	}
	// The plain key wins over the default; values are trimmed.
	require.Equal(t, "requested", s.For("SSL", "ssl.client.auth"))
	require.Equal(t, "/plain.pem", s.For("MTLS", "ssl.keystore.location"))
	// The default when neither is given.
	require.Equal(t, "TLSv1.2,TLSv1.3", s.For("SSL", "ssl.enabled.protocols"))
	require.Equal(t, "DEFAULT", s.For("SSL", "ssl.principal.mapping.rules"))
	require.Equal(t, "PEM", s.For("SSL", "ssl.keystore.type"))
	require.Equal(t, "", s.For("SSL", "ssl.truststore.location"))
	require.Equal(t, "none", Settings{}.For("SSL", "ssl.client.auth"))
	// An override given empty still wins.
	s["ssl.cipher.suites"] = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
	require.Equal(t, "", s.For("INTERNAL", "ssl.cipher.suites"))
	require.Equal(t, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", s.For("SSL", "ssl.cipher.suites"))
	// A key that is no security config has no default.
	require.Equal(t, "", s.For("SSL", "ssl.unknown"))
}

func TestSettingsValidate(t *testing.T) {
	listeners := map[string]bool{"PLAINTEXT": true, "SSL": true, "MTLS": true}
	ok := Settings{
		"ssl.keystore.location":                      "/k.pem",
		"ssl.client.auth":                            "none",
		"listener.name.mtls.ssl.client.auth":         "required",
		"listener.name.mtls.ssl.truststore.location": "/ca.pem",
		"listener.name.ssl.ssl.enabled.protocols":    "TLSv1.3",
		"ssl.principal.mapping.rules":                "RULE:^CN=(.*?),.*$/$1/L,DEFAULT",
	}
	require.NoError(t, ok.Validate(listeners))
	require.NoError(t, Settings{}.Validate(listeners))
	require.NoError(t, Settings{}.Validate(nil))

	for _, c := range []struct {
		s    Settings
		want string
	}{
		{Settings{"ssl.unknown": "x"}, "ssl.unknown"},
		{Settings{"listener.name.mtls.ssl.unknown": "x"}, "listener.name.mtls.ssl.unknown"},
		{Settings{"listener.name.external.ssl.client.auth": "required"}, "EXTERNAL"},
		{Settings{"listener.name.mtls.ssl.client.auth": "sometimes"}, "listener.name.mtls.ssl.client.auth"},
		{Settings{"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols"},
		{Settings{"ssl.key.password": "secret"}, "ssl.key.password"},
		{Settings{"ssl.keystore.type": "JKS"}, "ssl.keystore.type"},
		{Settings{"ssl.principal.mapping.rules": "RULE:bad"}, "ssl.principal.mapping.rules"},
	} {
		err := c.s.Validate(listeners)
		require.Error(t, err, "%v", c.s)
		require.Contains(t, err.Error(), c.want)
	}

	// A prefix naming no listener is refused even if nothing is known.
	require.Error(t, Settings{"listener.name.ssl.ssl.client.auth": "none"}.Validate(nil))

	// Errors come in name order: the first bad key is reported.
	err := Settings{"ssl.z.unknown": "x", "ssl.a.unknown": "y"}.Validate(listeners)
	require.Error(t, err)
	require.Contains(t, err.Error(), "ssl.a.unknown")
}

// A key Validate accepts must be one For reads: a listener override
// written with an upper-case name (listener.name.MTLS.ssl.client.auth)
// passes Validate, as splitKey upper-cases the name, but For only reads
// the lower-case prefix, so the override silently does nothing (here
// mTLS would be off). Kafka's prefix is lower-case too
// (ListenerName.configPrefix), so either Validate refuses the key or For
// honours it.
func TestSettingsValidateAcceptsOnlyKeysForReads(t *testing.T) {
	s := Settings{"listener.name.MTLS.ssl.client.auth": "required"}
	if err := s.Validate(map[string]bool{"MTLS": true}); err == nil {
		require.Equal(t, "required", s.For("MTLS", "ssl.client.auth"))
	}
}
