package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// describeRules renders a mapper's rules the way Kafka's
// SslPrincipalMapper.Rule.toString does (RULE:pattern/replacement, then
// /L or /U), the replacement being the parsed (Go) template.
func describeRules(m *PrincipalMapper) []string {
	out := []string{}
	for _, r := range m.rules {
		if r.isDefault {
			out = append(out, "DEFAULT")
			continue
		}
		s := "RULE:" + r.re.String() + "/" + r.template
		switch {
		case r.lower:
			s += "/L"
		case r.upp:
			s += "/U"
		}
		out = append(out, s)
	}
	return out
}

func mustRules(t *testing.T, rules string) *PrincipalMapper {
	t.Helper()
	m, err := ParseMappingRules(rules)
	require.NoError(t, err, "rules %q", rules)
	return m
}

func mapDN(t *testing.T, m *PrincipalMapper, dn string) string {
	t.Helper()
	name, err := m.Map(dn)
	require.NoError(t, err, "dn %q", dn)
	return name
}

// Kafka's SslPrincipalMapperTest.testValidRules.
func TestParseMappingRulesValid(t *testing.T) {
	for _, rules := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
		// The documented example, one line.
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT",
	} {
		_, err := ParseMappingRules(rules)
		require.NoError(t, err, "rules %q", rules)
		require.NoError(t, CheckValue("ssl.principal.mapping.rules", rules), "rules %q", rules)
	}
}

// Kafka's SslPrincipalMapperTest.testInvalidRules, and a few more.
func TestParseMappingRulesInvalid(t *testing.T) {
	for _, rules := range []string{
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		// More: a flag Kafka does not know, text after a rule, a
		// pattern that does not compile, a dangling escape.
		"RULE:^CN=(.*)$/$1/X",
		"RULE:^CN=(.*)$/$1/LU",
		"DEFAULT DEFAULT",
		"RULE:a/b/ L",
		"DEFAULTX",
		"RULE:^CN=(.*$/$1/",
		`RULE:abc\`,
		`RULE:a/b\/`,
	} {
		_, err := ParseMappingRules(rules)
		require.Error(t, err, "rules %q", rules)
		require.Error(t, CheckValue("ssl.principal.mapping.rules", rules), "rules %q", rules)
	}
}

// Kafka's SslPrincipalMapperTest.testSslPrincipalMapper.
func TestPrincipalMapperKafkaExamples(t *testing.T) {
	m := mustRules(t, strings.Join([]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
		"DEFAULT",
	}, ", "))
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		require.Equal(t, want, mapDN(t, m, dn), "dn %q", dn)
	}
}

// The example of Kafka's documentation (security.html, "Customizing SSL
// User Name"), given on one line.
func TestPrincipalMapperDocumentedExample(t *testing.T) {
	m := mustRules(t, "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"+
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"+
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"+
		"DEFAULT")
	require.Equal(t, "serviceuser", mapDN(t, m, "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"))
	require.Equal(t, "adminuser@admin", mapDN(t, m, "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"))
	// Neither of the first two rules matches ", OU=" (a space after the
	// comma); the third takes the CN's leading [a-zA-Z0-9.]* only.
	require.Equal(t, "kafka", mapDN(t, m, "CN=kafka-server1, OU=KAFKA"))
	require.Equal(t, "kafka.server1", mapDN(t, m, "CN=Kafka.Server1, OU=KAFKA"))
	// No CN at all: DEFAULT, the DN unchanged.
	require.Equal(t, "OU=KAFKA,O=Example", mapDN(t, m, "OU=KAFKA,O=Example"))
	// The first rule keeps the case (no L).
	require.Equal(t, "ServiceUser", mapDN(t, m, "CN=ServiceUser,OU=ServiceUsers,O=x"))
}

func TestPrincipalMapperNoMatchingRule(t *testing.T) {
	m := mustRules(t, "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
	require.Equal(t, "serviceuser", mapDN(t, m, "CN=serviceuser,OU=ServiceUsers,O=Unknown"))
	_, err := m.Map("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
	require.Error(t, err)
	require.Contains(t, err.Error(), "CN=adminUser,OU=Admin")

	// The pattern must match the whole DN (Java's Matcher.matches), not a
	// part of it.
	m = mustRules(t, "RULE:CN=([a-z]+)/$1/")
	require.Equal(t, "alice", mapDN(t, m, "CN=alice"))
	_, err = m.Map("CN=alice,OU=eng")
	require.Error(t, err)
	_, err = m.Map("X,CN=alice")
	require.Error(t, err)
}

func TestPrincipalMapperFirstMatchWins(t *testing.T) {
	m := mustRules(t, "RULE:^CN=([^,]*),OU=a$/first-$1/,RULE:^CN=([^,]*),.*$/second-$1/U,DEFAULT")
	require.Equal(t, "first-x", mapDN(t, m, "CN=x,OU=a"))
	require.Equal(t, "SECOND-X", mapDN(t, m, "CN=x,OU=b"))
	require.Equal(t, "CN=x", mapDN(t, m, "CN=x"))

	// DEFAULT first: the later rules never apply.
	m = mustRules(t, "DEFAULT,RULE:^CN=(.*)$/$1/")
	require.Equal(t, "CN=x", mapDN(t, m, "CN=x"))
}

func TestPrincipalMapperLowerUpper(t *testing.T) {
	m := mustRules(t, "RULE:^CN=([^,]*),OU=low$/$1/L,RULE:^CN=([^,]*),OU=up$/$1/U,RULE:^CN=([^,]*),OU=keep$/$1/")
	require.Equal(t, "mixed.case", mapDN(t, m, "CN=MiXed.Case,OU=low"))
	require.Equal(t, "MIXED.CASE", mapDN(t, m, "CN=MiXed.Case,OU=up"))
	require.Equal(t, "MiXed.Case", mapDN(t, m, "CN=MiXed.Case,OU=keep"))
}

// Kafka's SslPrincipalMapperTest.testCommaWithWhitespace: an escaped
// comma in the CN, matched by a pattern with "\\," in it.
func TestPrincipalMapperCommaWithWhitespace(t *testing.T) {
	m := mustRules(t, `RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	require.Equal(t, `Tkac\, Adam`, mapDN(t, m, `CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`))
}

func TestPrincipalMapperEscapes(t *testing.T) {
	// "\/" in the pattern is a literal slash and does not end it; "\/"
	// in the replacement is a literal slash too.
	m := mustRules(t, `RULE:^([^\/]*)\/(.*)$/$2\/$1/`)
	require.Equal(t, "b/a", mapDN(t, m, "a/b"))

	// "\$" in the replacement is a literal dollar.
	m = mustRules(t, `RULE:^CN=([^,]*).*$/\$$1/`)
	require.Equal(t, "$alice", mapDN(t, m, "CN=alice,OU=x"))

	// "$0" is the whole match.
	m = mustRules(t, `RULE:^CN=([^,]*)$/$0|$1/`)
	require.Equal(t, "CN=alice|alice", mapDN(t, m, "CN=alice"))

	// Kafka's escape-sequence splitting cases.
	m = mustRules(t, `RULE:\/\\\(\)\n\t/\/\//`)
	require.Equal(t, []string{`RULE:\/\\\(\)\n\t///`}, describeRules(m))
	require.Equal(t, "//", mapDN(t, m, "/\\()\n\t"))

	m = mustRules(t, `RULE:\**\/+/*/L,RULE:\/*\**/**/`)
	require.Equal(t, []string{`RULE:\**\/+/*/L`, `RULE:\/*\**/**`}, describeRules(m))
	require.Equal(t, "*", mapDN(t, m, "***//"))
}

// Kafka's SslPrincipalMapperTest.testRulesSplitting, the cases without
// empty entries (those are in TestParseMappingRulesIgnoresEmptyRules).
func TestParseMappingRulesSplitting(t *testing.T) {
	for _, c := range []struct {
		rules string
		want  []string
	}{
		{"DEFAULT", []string{"DEFAULT"}},
		{"RULE://", []string{"RULE:/"}},
		{"RULE:/.*/", []string{"RULE:/.*"}},
		{"RULE:/.*/L", []string{"RULE:/.*/L"}},
		{"RULE://,DEFAULT", []string{"RULE:/", "DEFAULT"}},
		{"  RULE:// ,  DEFAULT  ", []string{"RULE:/", "DEFAULT"}},
		{"  RULE:   /     / ,  DEFAULT  ", []string{"RULE:   /     ", "DEFAULT"}},
		{"  RULE:  /     /U   ,DEFAULT  ", []string{"RULE:  /     /U", "DEFAULT"}},
		{"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", []string{"RULE:([A-Z]*)/${1}/U", "RULE:([a-z]+)/${1}", "DEFAULT"}},
		{"\tDEFAULT\t,\tDEFAULT\t", []string{"DEFAULT", "DEFAULT"}},
		// A trailing comma ends the list.
		{"DEFAULT,", []string{"DEFAULT"}},
		{
			`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
			[]string{`RULE:,RULE:,/,RULE:,//U`, `RULE:,/RULE:,`, `RULE:,RULE:,/L,RULE:,/L`, `RULE:, DEFAULT, /DEFAULT`, `DEFAULT`},
		},
	} {
		m, err := ParseMappingRules(c.rules)
		require.NoError(t, err, "rules %q", c.rules)
		require.Equal(t, c.want, describeRules(m), "rules %q", c.rules)
	}
}

// An empty value is the default, DEFAULT. (Kafka's own mapper gives no
// rules for "", so that every name fails; Kafka's config default is
// DEFAULT.)
func TestParseMappingRulesEmptyIsDefault(t *testing.T) {
	for _, rules := range []string{"", "   ", "\t"} {
		m := mustRules(t, rules)
		require.Equal(t, []string{"DEFAULT"}, describeRules(m))
		require.Equal(t, "CN=a,O=b", mapDN(t, m, "CN=a,O=b"))
	}
}

// Kafka ignores empty entries between commas ("empty rules are ignored"
// in SslPrincipalMapperTest.testRulesSplitting): its splitter takes
// \s*(rule)\s*(,\s*|$) and an empty rule adds nothing.
func TestParseMappingRulesIgnoresEmptyRules(t *testing.T) {
	for _, c := range []struct {
		rules string
		want  []string
	}{
		{",,RULE://,,,DEFAULT,,", []string{"RULE:/", "DEFAULT"}},
		{",  , RULE: /   /    ,,,   DEFAULT, ,   ", []string{"RULE: /   ", "DEFAULT"}},
		{"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", []string{"RULE:   /  /U", "DEFAULT"}},
		{",DEFAULT", []string{"DEFAULT"}},
	} {
		m, err := ParseMappingRules(c.rules)
		require.NoError(t, err, "rules %q", c.rules)
		require.Equal(t, c.want, describeRules(m), "rules %q", c.rules)
	}
}

// Kafka's documentation writes the example one rule a line, each line
// ending in a comma; Kafka's splitter takes any whitespace (\s, newlines
// included) after a comma.
func TestParseMappingRulesNewlineAfterComma(t *testing.T) {
	rules := "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\n" +
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\n" +
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,\n" +
		"DEFAULT"
	m := mustRules(t, rules)
	require.Len(t, m.rules, 4)
	require.Equal(t, "adminuser@admin", mapDN(t, m, "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"))
	m = mustRules(t, "RULE:^CN=([^,]*).*$/$1/\r\n,\r\nDEFAULT")
	require.Len(t, m.rules, 2)
}

// Kafka (SslPrincipalMapper.Rule.escapeLiteralBackReferences, then
// Java's replaceAll) writes a back reference to a group the pattern does
// not have as literal text ("$1@$3" with two groups gives "a@$3"), and
// reads "$12" with one group as group 1 then "2".
func TestPrincipalMapperMissingGroupIsLiteral(t *testing.T) {
	m := mustRules(t, "RULE:^CN=(.*?),OU=(.*?)$/$1@$3/")
	require.Equal(t, "a@$3", mapDN(t, m, "CN=a,OU=b"))
	m = mustRules(t, "RULE:^CN=([^,]*).*$/$12/")
	require.Equal(t, "a2", mapDN(t, m, "CN=a,OU=b"))
}

// Java's String.replaceAll replaces every match, including the empty
// match at the end of the DN a pattern such as ".*" also has: Kafka maps
// any DN through RULE:.*/admin/ to "adminadmin".
func TestPrincipalMapperReplaceAllEmptyMatch(t *testing.T) {
	m := mustRules(t, "RULE:.*/admin/")
	require.Equal(t, "adminadmin", mapDN(t, m, "CN=alice"))
	m = mustRules(t, `RULE:\/*\**/**/`)
	require.Equal(t, "****", mapDN(t, m, "//**"))
}

// --- SubjectDN ---

var (
	oidCN     = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidSN     = asn1.ObjectIdentifier{2, 5, 4, 5}
	oidC      = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidL      = asn1.ObjectIdentifier{2, 5, 4, 7}
	oidST     = asn1.ObjectIdentifier{2, 5, 4, 8}
	oidStreet = asn1.ObjectIdentifier{2, 5, 4, 9}
	oidO      = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOU     = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidTitle  = asn1.ObjectIdentifier{2, 5, 4, 12}
	oidDC     = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	oidEmail  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
)

func atv(oid asn1.ObjectIdentifier, v any) pkix.AttributeTypeAndValue {
	return pkix.AttributeTypeAndValue{Type: oid, Value: v}
}

// tagged is a string value with an explicit ASN.1 string type.
func tagged(tag int, s string) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: []byte(s)}
}

// rdns is a subject as encoded, least specific RDN first.
func rdns(sets ...[]pkix.AttributeTypeAndValue) pkix.RDNSequence {
	seq := pkix.RDNSequence{}
	for _, s := range sets {
		seq = append(seq, pkix.RelativeDistinguishedNameSET(s))
	}
	return seq
}

func one(oid asn1.ObjectIdentifier, v any) []pkix.AttributeTypeAndValue {
	return []pkix.AttributeTypeAndValue{atv(oid, v)}
}

// certWithSubject is a self-signed ECDSA P-256 certificate whose subject
// is exactly seq.
func certWithSubject(t *testing.T, seq pkix.RDNSequence) *x509.Certificate {
	t.Helper()
	raw, err := asn1.Marshal(seq)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		RawSubject:   raw,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	require.Equal(t, raw, cert.RawSubject)
	return cert
}

func subjectDN(t *testing.T, seq pkix.RDNSequence) string {
	t.Helper()
	dn, err := SubjectDN(certWithSubject(t, seq))
	require.NoError(t, err)
	return dn
}

func TestSubjectDN(t *testing.T) {
	for _, c := range []struct {
		name string
		seq  pkix.RDNSequence
		want string
	}{
		{
			"simple",
			rdns(one(oidC, "US"), one(oidO, "Example"), one(oidOU, "eng"), one(oidCN, "alice")),
			"CN=alice,OU=eng,O=Example,C=US",
		},
		{
			"every keyword",
			rdns(
				one(oidDC, tagged(asn1.TagIA5String, "com")),
				one(oidDC, tagged(asn1.TagIA5String, "example")),
				one(oidC, "US"),
				one(oidST, "California"),
				one(oidL, "San Francisco"),
				one(oidStreet, "1 Main St"),
				one(oidO, "Example"),
				one(oidOU, "eng"),
				one(oidUID, "alice01"),
				one(oidCN, "alice"),
			),
			"CN=alice,UID=alice01,OU=eng,O=Example,STREET=1 Main St,L=San Francisco,ST=California,C=US,DC=example,DC=com",
		},
		{
			"Kafka's default user name",
			rdns(one(oidC, "Unknown"), one(oidST, "Unknown"), one(oidL, "Unknown"), one(oidO, "Unknown"), one(oidOU, "Unknown"), one(oidCN, "writeuser")),
			"CN=writeuser,OU=Unknown,O=Unknown,L=Unknown,ST=Unknown,C=Unknown",
		},
		{
			// A SET OF is written in its DER order (Go's encoder sorts
			// it: the shorter OU sequence first), joined by '+'.
			"multi-valued RDN",
			rdns(one(oidC, "US"), []pkix.AttributeTypeAndValue{atv(oidCN, "alice"), atv(oidOU, "eng")}),
			"OU=eng+CN=alice,C=US",
		},
		{
			// Attributes with no RFC 2253 keyword: OID=#hex of the DER
			// value, whatever its type.
			"no keyword",
			rdns(
				one(oidO, "Example"),
				one(oidSN, "1234"),
				one(oidTitle, "boss"),
				one(oidCN, "alice"),
				one(oidEmail, tagged(asn1.TagIA5String, "alice@example.com")),
			),
			"1.2.840.113549.1.9.1=#1611616c696365406578616d706c652e636f6d,CN=alice,2.5.4.12=#1304626f7373,2.5.4.5=#130431323334,O=Example",
		},
		{
			"emailAddress in a multi-valued RDN",
			rdns(one(oidC, "US"), []pkix.AttributeTypeAndValue{atv(oidCN, "bob"), atv(oidEmail, tagged(asn1.TagIA5String, "b@x"))}),
			"CN=bob+1.2.840.113549.1.9.1=#1603624078,C=US",
		},
		{
			"string types",
			rdns(
				one(oidO, tagged(asn1.TagUTF8String, "utf8 é")),
				one(oidOU, tagged(asn1.TagPrintableString, "printable")),
				one(oidL, tagged(asn1.TagIA5String, "ia5")),
				one(oidST, tagged(asn1.TagT61String, "t61")),
			),
			"ST=t61,L=ia5,OU=printable,O=utf8 é",
		},
		{"empty subject", rdns(), ""},
		{"empty value", rdns(one(oidO, "x"), one(oidCN, "")), "CN=,O=x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, subjectDN(t, c.seq))
		})
	}
}

// A keyword whose value is not a string is written as #hex too. Go's
// x509.ParseCertificate refuses such a subject, so the certificate here
// is only its RawSubject.
func TestSubjectDNNonStringValue(t *testing.T) {
	raw, err := asn1.Marshal(rdns(
		one(oidC, "US"),
		one(oidCN, asn1.RawValue{Class: asn1.ClassUniversal, Tag: 28, Bytes: []byte{0, 0, 0, 'A'}}),
		one(oidOU, 5),
	))
	require.NoError(t, err)
	dn, err := SubjectDN(&x509.Certificate{RawSubject: raw})
	require.NoError(t, err)
	require.Equal(t, "OU=#020105,CN=#1c0400000041,C=US", dn)
}

func TestSubjectDNEscaping(t *testing.T) {
	for _, c := range []struct {
		value, want string
	}{
		{"Smith, John", `CN=Smith\, John`},
		{"a+b", `CN=a\+b`},
		{`say "hi"`, `CN=say \"hi\"`},
		{`back\slash`, `CN=back\\slash`},
		{"<tag>", `CN=\<tag\>`},
		{"semi;colon", `CN=semi\;colon`},
		{"#hash", `CN=\#hash`},
		{" lead", `CN=\ lead`},
		{"trail ", `CN=trail\ `},
		{" both ", `CN=\ both\ `},
		{" ", `CN=\ `},
		{"in side", `CN=in side`},
		{"a,b+c", `CN=a\,b\+c`},
	} {
		seq := rdns(one(oidC, "US"), one(oidCN, c.value))
		require.Equal(t, c.want+",C=US", subjectDN(t, seq), "value %q", c.value)
	}
}

// Java's AVA.toRFC2253String escapes more than RFC 2253 requires: "="
// and "#" anywhere, each of several leading or trailing spaces (and
// carriage returns), NUL as \00; and it writes a keyword's value as #hex
// unless it is a PrintableString, T61String, IA5String, GeneralString,
// BMPString or UTF8String (so a NumericString is hex).
func TestSubjectDNEscapingLikeJava(t *testing.T) {
	for _, c := range []struct {
		value any
		want  string
	}{
		{"a=b", `CN=a\=b`},
		{"a#b", `CN=a\#b`},
		{"x==", `CN=x\=\=`},
		{"  two  ", `CN=\ \ two\ \ `},
		{" #x", `CN=\ \#x`},
		{"   ", `CN=\ \ \ `},
		{"a\x00b", `CN=a\00b`},
		{tagged(asn1.TagNumericString, "123"), `CN=#1203313233`},
	} {
		t.Run(c.want, func(t *testing.T) {
			seq := rdns(one(oidC, "US"), one(oidCN, c.value))
			require.Equal(t, c.want+",C=US", subjectDN(t, seq), "value %q", c.value)
		})
	}
}

func TestSubjectDNThroughMapper(t *testing.T) {
	cert := certWithSubject(t, rdns(
		one(oidC, "Unknown"), one(oidST, "Unknown"), one(oidL, "Unknown"),
		one(oidO, "Unknown"), one(oidOU, "Admin"), one(oidCN, "adminUser"),
	))
	dn, err := SubjectDN(cert)
	require.NoError(t, err)
	m := mustRules(t, "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT")
	require.Equal(t, "adminuser@admin", mapDN(t, m, dn))
}

func TestSubjectDNBadSubject(t *testing.T) {
	_, err := SubjectDN(&x509.Certificate{RawSubject: []byte{0x30, 0x05, 0x31}})
	require.Error(t, err)
	_, err = SubjectDN(&x509.Certificate{RawSubject: []byte{0x30, 0x00, 0x00}})
	require.Error(t, err)
}

// A pattern valid alone but not inside the full-match anchors (\Q
// swallows them) is a parse error, not a panic (found by review).
func TestMappingRuleQuoteIsAnError(t *testing.T) {
	_, err := ParseMappingRules(`RULE:\Qabc/x/`)
	require.Error(t, err)
}
