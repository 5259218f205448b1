package security

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/xdg-go/scram"
)

// ErrAuthFailed is every failed authentication: the same for an unknown
// user and a wrong password (the message is Kafka's).
var ErrAuthFailed = errors.New("authentication failed: invalid credentials")

// Exchange is one SASL authentication in progress on a connection.
type Exchange interface {
	// Step takes the client's next message and returns the server's;
	// done once the client is authenticated. An error ends it (the
	// connection closes): ErrAuthFailed for bad credentials.
	Step(in []byte) (out []byte, done bool, err error)
	// User is the authenticated user name, once done.
	User() string
}

// EnabledMechanisms parses sasl.enabled.mechanisms for listener; PLAIN
// on a listener without TLS is refused unless allowPlain is set.
func EnabledMechanisms(s Settings, listener string, tls bool) ([]string, error) {
	var out []string
	for _, m := range strings.Split(s.For(listener, "sasl.enabled.mechanisms"), ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		switch m {
		case "":
			continue
		case ScramSHA256, ScramSHA512, OAuthBearerMechanism:
		case Plain:
			if !tls && !strings.EqualFold(s.For(listener, "shoal.sasl.plain.allow.plaintext"), "true") {
				return nil, fmt.Errorf("listener %s: PLAIN sends passwords in the clear without TLS; use SASL_SSL or set shoal.sasl.plain.allow.plaintext=true", listener)
			}
		default:
			return nil, fmt.Errorf("listener %s: SASL mechanism %q is not served (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER)", listener, m)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms is empty", listener)
	}
	return out, nil
}

// OAuthBearerMechanism is OAUTHBEARER's mechanism name.
const OAuthBearerMechanism = "OAUTHBEARER"

// NewExchange starts mech's exchange against creds (SCRAM, PLAIN) or
// oauth (OAUTHBEARER, nil unless enabled).
func NewExchange(mech string, creds *Credentials, oauth *OAuthBearer) (Exchange, error) {
	switch mech {
	case OAuthBearerMechanism:
		if oauth == nil {
			return nil, fmt.Errorf("OAUTHBEARER is not configured")
		}
		return &oauthExchange{o: oauth}, nil
	case ScramSHA256, ScramSHA512:
		_, gen, _ := scramHash(mech)
		srv, err := gen.NewServer(func(user string) (scram.StoredCredentials, error) {
			name, ok := decodeSaslName(user)
			if !ok {
				return scram.StoredCredentials{}, ErrAuthFailed
			}
			return creds.lookup(mech, name), nil
		})
		if err != nil {
			return nil, err
		}
		return &scramExchange{conv: srv.NewConversation(), mech: mech, creds: creds}, nil
	case Plain:
		return &plainExchange{creds: creds}, nil
	}
	return nil, fmt.Errorf("unknown mechanism %q", mech)
}

type scramExchange struct {
	conv  *scram.ServerConversation
	mech  string
	creds *Credentials
	user  string
	// first and serverFirst are the client-first message (without its
	// GS2 header) and the server-first message, kept for the
	// librdkafka path below.
	first, serverFirst string
	nonce              string // the server-first's nonce (c-nonce + s-nonce)
	gs2                string
}

func (e *scramExchange) Step(in []byte) ([]byte, bool, error) {
	if e.serverFirst != "" {
		if out, ok, handled := e.librdkafkaFinal(string(in)); handled {
			if !ok {
				return nil, false, ErrAuthFailed
			}
			return out, true, nil
		}
	}
	out, err := e.conv.Step(string(in))
	if err != nil {
		return nil, false, ErrAuthFailed
	}
	if !e.conv.Done() {
		// The first message: an authorization id other than the user
		// would be impersonation (CVE-2017-12610); Kafka refuses it.
		user, ok := decodeSaslName(e.conv.Username())
		az, azOK := decodeSaslName(e.conv.AuthzID())
		if !ok || !azOK || az != "" && az != user {
			return nil, false, ErrAuthFailed
		}
		if i := strings.Index(string(in), ",n="); i >= 0 {
			e.gs2, e.first = string(in[:i+1]), string(in[i+1:])
		}
		e.serverFirst = out
		e.nonce = strings.TrimPrefix(strings.SplitN(out, ",", 2)[0], "r=")
		return []byte(out), false, nil
	}
	if !e.conv.Valid() {
		return nil, false, ErrAuthFailed
	}
	e.user, _ = decodeSaslName(e.conv.Username()) // checked at the first message
	return []byte(out), true, nil
}

// decodeSaslName decodes RFC 5802's saslname (",": "=2C", "=": "=3D");
// any other "=" makes it invalid.
func decodeSaslName(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// librdkafkaFinal checks a client-final message whose nonce is the
// client's nonce followed by the whole server nonce, as librdkafka
// before 2.6.1 sends it (confluentinc/librdkafka#4895; Kafka 3.8.1 to
// 3.9 accept it, checking that it ends in the server nonce). The
// message still carries the server's fresh nonce in full, so a replay
// fails as RFC 5802 means it to (CVE-2024-56128); any other nonce is
// left to the library, which requires it to equal the server's. It
// verifies the proof as RFC 5802 §3 defines it, over the message as
// the client wrote it. handled is false when the message is not of
// that form.
func (e *scramExchange) librdkafkaFinal(msg string) (out []byte, ok, handled bool) {
	attrs := strings.Split(msg, ",")
	if len(attrs) < 3 || !strings.HasPrefix(attrs[1], "r=") {
		return nil, false, false
	}
	_, cnonce, found := strings.Cut(e.first, ",r=")
	cnonce, _, _ = strings.Cut(cnonce, ",")
	if !found || cnonce == "" || attrs[1] != "r="+cnonce+e.nonce {
		return nil, false, false
	}
	proofAttr := attrs[len(attrs)-1]
	if !strings.HasPrefix(proofAttr, "p=") || attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(e.gs2)) {
		return nil, false, true
	}
	proof, err := base64.StdEncoding.DecodeString(proofAttr[2:])
	if err != nil {
		return nil, false, true
	}
	user, _ := decodeSaslName(e.conv.Username()) // checked at the first message
	cred := e.creds.lookup(e.mech, user)
	h, _, _ := scramHash(e.mech)
	authMsg := e.first + "," + e.serverFirst + "," + strings.TrimSuffix(msg, ","+proofAttr)
	sig := hmacOf(h, cred.StoredKey, authMsg)
	if len(proof) != len(sig) {
		return nil, false, true
	}
	clientKey := make([]byte, len(sig))
	for i := range sig {
		clientKey[i] = proof[i] ^ sig[i]
	}
	if !hmac.Equal(hashOf(h, clientKey), cred.StoredKey) {
		return nil, false, true
	}
	e.user = user
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacOf(h, cred.ServerKey, authMsg))), true, true
}

func (e *scramExchange) User() string { return e.user }

type plainExchange struct {
	creds *Credentials
	user  string
}

// Step reads RFC 4616's message: [authzid] NUL authcid NUL passwd.
func (e *plainExchange) Step(in []byte) ([]byte, bool, error) {
	parts := bytes.Split(in, []byte{0})
	if len(parts) != 3 {
		return nil, false, ErrAuthFailed
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || pass == "" || authz != "" && authz != user {
		return nil, false, ErrAuthFailed
	}
	if !e.creds.CheckPlain(user, pass) {
		return nil, false, ErrAuthFailed
	}
	e.user = user
	return nil, true, nil
}

func (e *plainExchange) User() string { return e.user }
