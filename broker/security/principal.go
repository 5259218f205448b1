package security

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Anonymous is the principal of an unauthenticated connection, as in
// Kafka (KafkaPrincipal.ANONYMOUS).
const Anonymous = "User:ANONYMOUS"

// rfc2253Keywords are the attribute types Java's X500Principal.getName()
// (RFC 2253 format) writes by name; others are written as OID=#hex.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "STREET",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

type attrTypeValue struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rdnSET is one relative distinguished name (a SET OF; the name ending
// in SET tells encoding/asn1).
type rdnSET []attrTypeValue

// SubjectDN is a certificate's subject as Kafka's default principal
// mapping sees it: Java's X500Principal.getName(), RFC 2253, the most
// specific RDN first ("CN=alice,OU=eng,O=Example,C=US").
func SubjectDN(cert *x509.Certificate) (string, error) {
	var seq []rdnSET
	rest, err := asn1.Unmarshal(cert.RawSubject, &seq)
	if err != nil || len(rest) != 0 {
		return "", fmt.Errorf("certificate subject does not decode")
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i != len(seq)-1 {
			b.WriteByte(',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			writeATV(&b, atv)
		}
	}
	return b.String(), nil
}

func writeATV(b *strings.Builder, atv attrTypeValue) {
	kw, known := rfc2253Keywords[atv.Type.String()]
	if known {
		var s string
		if _, err := asn1.Unmarshal(atv.Value.FullBytes, &s); err == nil {
			b.WriteString(kw)
			b.WriteByte('=')
			writeEscaped(b, s)
			return
		}
	}
	if kw == "" {
		kw = atv.Type.String()
	}
	b.WriteString(kw)
	b.WriteString("=#")
	b.WriteString(hex.EncodeToString(atv.Value.FullBytes))
}

// writeEscaped escapes a value as RFC 2253 §2.4 says.
func writeEscaped(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte(",+\"\\<>;", c) >= 0,
			i == 0 && (c == '#' || c == ' '),
			i == len(s)-1 && c == ' ':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
}

// PrincipalMapper maps a certificate DN to a user name with Kafka's
// ssl.principal.mapping.rules: DEFAULT (the DN unchanged) and
// RULE:pattern/replacement/[LU], tried in order; the first whose
// pattern matches the whole DN gives the name (lower- or upper-cased
// with L or U). A DN no rule matches fails the authentication.
type PrincipalMapper struct{ rules []mappingRule }

type mappingRule struct {
	isDefault  bool
	full       *regexp.Regexp // ^(?:pattern)$: Java's Matcher.matches
	re         *regexp.Regexp
	template   string
	lower, upp bool
}

// ParseMappingRules parses an ssl.principal.mapping.rules value.
func ParseMappingRules(s string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{}
	rest := strings.TrimSpace(s)
	if rest == "" {
		rest = "DEFAULT"
	}
	for rest != "" {
		var r mappingRule
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			r.isDefault = true
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			rest = rest[len("RULE:"):]
			pat, after, ok := cutUnescaped(rest)
			if !ok {
				return nil, fmt.Errorf("rule %q has no replacement", "RULE:"+rest)
			}
			repl, after, ok := cutUnescaped(after)
			if !ok {
				return nil, fmt.Errorf("rule %q does not end in /", "RULE:"+rest)
			}
			if strings.HasPrefix(after, "L") {
				r.lower, after = true, after[1:]
			} else if strings.HasPrefix(after, "U") {
				r.upp, after = true, after[1:]
			}
			var err error
			if r.re, err = regexp.Compile(pat); err != nil {
				return nil, fmt.Errorf("rule pattern %q: %v", pat, err)
			}
			r.full = regexp.MustCompile("^(?:" + pat + ")$")
			r.template = javaReplacement(repl)
			rest = after
		default:
			return nil, fmt.Errorf("invalid rule %q: want DEFAULT or RULE:pattern/replacement/[LU]", rest)
		}
		rest = strings.TrimLeft(rest, " \t")
		if rest != "" {
			if rest[0] != ',' {
				return nil, fmt.Errorf("invalid rule text %q", rest)
			}
			rest = strings.TrimLeft(rest[1:], " \t")
		}
		m.rules = append(m.rules, r)
	}
	return m, nil
}

// cutUnescaped splits s at its first '/' not escaped by a backslash.
func cutUnescaped(s string) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '/':
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// javaReplacement turns a Java replaceAll replacement ($1 for a group,
// \x for a literal x) into a regexp.Expand template.
func javaReplacement(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(s[i])
			}
		case c == '$' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			b.WriteString("${" + s[i+1:j] + "}")
			i = j - 1
		case c == '$':
			b.WriteString("$$")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Map returns the user name for dn, or an error if no rule applies.
func (m *PrincipalMapper) Map(dn string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.full.MatchString(dn) {
			continue
		}
		out := r.re.ReplaceAllString(dn, r.template)
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upp:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("no ssl.principal.mapping.rules rule applies to %q", dn)
}
