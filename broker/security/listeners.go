package security

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Protocol is a listener's security protocol (Kafka's SecurityProtocol).
type Protocol string

const (
	Plaintext     Protocol = "PLAINTEXT"
	SSL           Protocol = "SSL"
	SASLPlaintext Protocol = "SASL_PLAINTEXT"
	SASLSSL       Protocol = "SASL_SSL"
)

// TLS reports whether connections on p are TLS.
func (p Protocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether connections on p authenticate with SASL.
func (p Protocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

func parseProtocol(s string) (Protocol, error) {
	switch p := Protocol(strings.ToUpper(strings.TrimSpace(s))); p {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
		return p, nil
	}
	return "", fmt.Errorf("%q is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", s)
}

// Endpoint is one entry of Kafka's listeners or advertised.listeners:
// NAME://host:port, the name upper-cased as Kafka normalises it.
type Endpoint struct {
	Name string
	Host string
	Port int
}

// Addr is host:port.
func (e Endpoint) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

func (e Endpoint) String() string { return e.Name + "://" + e.Addr() }

// ParseEndpoints parses a comma-separated listeners value. An entry
// without NAME:// is PLAINTEXT (Shoal's --listen host:port shorthand).
// Names and ports are unique (port 0, a free port each, excepted);
// an empty host binds every interface, as in Kafka.
func ParseEndpoints(s string) ([]Endpoint, error) {
	var out []Endpoint
	names, ports := map[string]bool{}, map[int]bool{}
	for _, raw := range strings.Split(s, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		name, addr := string(Plaintext), raw
		if n, rest, ok := strings.Cut(raw, "://"); ok {
			name, addr = strings.ToUpper(n), rest
		}
		if !validName(name) {
			return nil, fmt.Errorf("%q: listener name %q must be letters, digits, '_' or '-'", raw, name)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%q is not NAME://host:port", raw)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("%q: port %q is invalid", raw, port)
		}
		if names[name] {
			return nil, fmt.Errorf("listener name %s is given twice", name)
		}
		if p != 0 && ports[p] {
			return nil, fmt.Errorf("port %d is given to two listeners", p)
		}
		names[name], ports[p] = true, true
		out = append(out, Endpoint{Name: name, Host: host, Port: p})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listener given")
	}
	return out, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// DefaultProtocolMap is Kafka's default listener.security.protocol.map:
// each protocol's name maps to itself.
func DefaultProtocolMap() map[string]Protocol {
	return map[string]Protocol{"PLAINTEXT": Plaintext, "SSL": SSL, "SASL_PLAINTEXT": SASLPlaintext, "SASL_SSL": SASLSSL}
}

// ParseProtocolMap parses listener.security.protocol.map
// (NAME:PROTOCOL,...). As in Kafka, the value replaces the default.
func ParseProtocolMap(s string) (map[string]Protocol, error) {
	m := map[string]Protocol{}
	for _, raw := range strings.Split(s, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		name, proto, ok := strings.Cut(raw, ":")
		name = strings.ToUpper(strings.TrimSpace(name))
		if !ok || !validName(name) {
			return nil, fmt.Errorf("%q is not NAME:PROTOCOL", raw)
		}
		p, err := parseProtocol(proto)
		if err != nil {
			return nil, err
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener name %s is mapped twice", name)
		}
		m[name] = p
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("empty")
	}
	return m, nil
}
