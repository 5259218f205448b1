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

// directoryStringTags are the ASN.1 string types Java writes as text
// (UTF8String, PrintableString, T61String, IA5String, BMPString);
// any other value is written as #hex of its DER encoding.
var directoryStringTags = map[int]bool{12: true, 19: true, 20: true, 22: true, 27: true, 30: true}

func writeATV(b *strings.Builder, atv attrTypeValue) {
	kw, known := rfc2253Keywords[atv.Type.String()]
	if known && atv.Value.Class == asn1.ClassUniversal && directoryStringTags[atv.Value.Tag] {
		var s string
		_, err := asn1.Unmarshal(atv.Value.FullBytes, &s)
		if err != nil && atv.Value.Tag == 27 { // GeneralString, which encoding/asn1 does not decode
			s, err = string(atv.Value.Bytes), nil
		}
		if err == nil {
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

// writeEscaped escapes a value as Java's RFC 2253 writer does: the
// special characters ,=+<>#;\" with a backslash wherever they are,
// every leading and trailing space, and control characters as \XX.
func writeEscaped(b *strings.Builder, s string) {
	lead := len(s) - len(strings.TrimLeft(s, " "))
	trail := len(s) - len(strings.TrimRight(s, " "))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte(",=+<>#;\\\"", c) >= 0,
			c == ' ' && (i < lead || i >= len(s)-trail):
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(b, "\\%02X", c)
		default:
			b.WriteByte(c)
		}
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
	// emptyAtEnd: the pattern matches an empty string at the end of a
	// DN it matched whole (it matches "" and is not anchored by ^).
	emptyAtEnd bool
}

// ParseMappingRules parses an ssl.principal.mapping.rules value.
func ParseMappingRules(s string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{}
	if strings.TrimSpace(s) == "" {
		s = "DEFAULT"
	}
	rest := s
	for {
		// Empty entries and any whitespace around commas are skipped,
		// as Kafka's rule splitter does.
		rest = strings.TrimLeft(rest, ", \t\r\n\f\v")
		if rest == "" {
			break
		}
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
			if r.full, err = regexp.Compile("^(?:" + pat + ")$"); err != nil {
				return nil, fmt.Errorf("rule pattern %q: %v", pat, err)
			}
			r.template = javaReplacement(repl, r.re.NumSubexp())
			r.emptyAtEnd = !strings.HasPrefix(pat, "^") && r.full.MatchString("")
			rest = after
		default:
			return nil, fmt.Errorf("invalid rule %q: want DEFAULT or RULE:pattern/replacement/[LU]", rest)
		}
		rest = strings.TrimLeft(rest, " \t\r\n\f\v")
		if rest != "" && rest[0] != ',' {
			return nil, fmt.Errorf("invalid rule text %q", rest)
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
// \x for a literal x) into a regexp.Expand template. As Java reads it,
// a reference takes as many digits as still name a group of the
// pattern ($12 with one group is group 1, then "2"); one naming no
// group stays literal text, as Kafka's mapper leaves it.
func javaReplacement(s string, groups int) string {
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
			ref := int(s[i+1] - '0')
			if ref > groups {
				b.WriteString("$$")
				continue
			}
			j := i + 2
			for j < len(s) && s[j] >= '0' && s[j] <= '9' && ref*10+int(s[j]-'0') <= groups {
				ref = ref*10 + int(s[j]-'0')
				j++
			}
			fmt.Fprintf(&b, "${%d}", ref)
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
		if r.emptyAtEnd && dn != "" {
			// Java's replaceAll also replaces the empty match at the
			// end that Go skips after a match reaching it.
			out += string(r.re.ExpandString(nil, r.template, "", []int{0, 0}))
		}
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
