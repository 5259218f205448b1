package security

import (
	"crypto/x509"
	"testing"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/meta"
)

// fuzzCreds is a store with admin's SCRAM-SHA-256 and -512 credentials
// (password "secret").
func fuzzCreds(f *testing.F) *Credentials {
	m, err := meta.Open(f.TempDir(), zap.NewNop())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close() })
	c, err := LoadCredentials(m)
	if err != nil {
		f.Fatal(err)
	}
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		salt := []byte("0123456789abcdef")
		salted, err := SaltedPassword(mech, "secret", salt, MinScramIterations)
		if err != nil {
			f.Fatal(err)
		}
		if err := c.Upsert(mech, "admin", salt, salted, MinScramIterations); err != nil {
			f.Fatal(err)
		}
	}
	return c
}

// FuzzSASLExchanges: hostile SASL tokens (a SCRAM client-first and
// client-final, with the server's nonce spliced in where the input
// asks, or a PLAIN message) never panic and never authenticate without
// the password.
func FuzzSASLExchanges(f *testing.F) {
	creds := fuzzCreds(f)
	f.Add(uint8(0), []byte("n,,n=admin,r=abc"), []byte("c=biws,r=%N,p=AAAA"))
	f.Add(uint8(1), []byte("n,a=bob,n=admin,r=abc"), []byte("c=biws,r=abc%N,p="))
	f.Add(uint8(2), []byte("\x00admin\x00wrong"), []byte(nil))
	f.Add(uint8(0), []byte("y,,n=admin,r=x,e=1"), []byte("c=eSws,r=x%N,x=1,p=////"))
	f.Fuzz(func(t *testing.T, which uint8, first, final []byte) {
		mech := []string{ScramSHA256, ScramSHA512, Plain}[int(which)%3]
		ex, err := NewExchange(mech, creds, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, done, err := ex.Step(first)
		if mech == Plain {
			if err == nil && done && string(first) != "\x00admin\x00secret" && string(first) != "admin\x00admin\x00secret" {
				t.Fatalf("PLAIN %q authenticated", first)
			}
			return
		}
		if err != nil {
			return
		}
		if done {
			t.Fatal("SCRAM done after one message")
		}
		// Splice the server nonce where the input says %N.
		nonce := ""
		if s := string(out); len(s) > 2 {
			nonce = s[2:]
			for i := range nonce {
				if nonce[i] == ',' {
					nonce = nonce[:i]
					break
				}
			}
		}
		msg := []byte{}
		for i := 0; i < len(final); i++ {
			if final[i] == '%' && i+1 < len(final) && final[i+1] == 'N' {
				msg = append(msg, nonce...)
				i++
				continue
			}
			msg = append(msg, final[i])
		}
		if _, done, err := ex.Step(msg); err == nil && done {
			t.Fatalf("SCRAM authenticated without the password: %q then %q", first, msg)
		}
	})
}

// FuzzPrincipalMapping: any rules text and DN parse and map without a
// panic.
func FuzzPrincipalMapping(f *testing.F) {
	f.Add("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L,DEFAULT", "CN=a,OU=b")
	f.Add(`RULE:\/*\**/**/,,`, "//**")
	f.Add("RULE:.*/$9$12\\$/U", "x")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := ParseMappingRules(rules)
		if err != nil {
			return
		}
		m.Map(dn)
	})
}

// FuzzSubjectDN: any subject bytes decode or fail without a panic.
func FuzzSubjectDN(f *testing.F) {
	f.Add([]byte{0x30, 0x0f, 0x31, 0x0d, 0x30, 0x0b, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x04, 'T', 'e', 's', 't'})
	f.Add([]byte{0x30, 0x00})
	f.Fuzz(func(t *testing.T, raw []byte) {
		SubjectDN(&x509.Certificate{RawSubject: raw})
	})
}

// FuzzListenerConfigs: listeners and protocol maps parse or fail
// without a panic, and what parses round-trips.
func FuzzListenerConfigs(f *testing.F) {
	f.Add("PLAINTEXT://127.0.0.1:9092,SSL://[::1]:0", "A:SSL,B:SASL_SSL")
	f.Add("://:,x://:99999", ":,")
	f.Fuzz(func(t *testing.T, listeners, protos string) {
		if eps, err := ParseEndpoints(listeners); err == nil {
			var s string
			for i, e := range eps {
				if i > 0 {
					s += ","
				}
				s += e.String()
			}
			again, err := ParseEndpoints(s)
			if err != nil || len(again) != len(eps) {
				t.Fatalf("%q parsed to %q, which does not parse back: %v", listeners, s, err)
			}
		}
		ParseProtocolMap(protos)
	})
}
