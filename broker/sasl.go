package broker

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/security"
)

// maxPreAuthFrame bounds a request frame before a SASL connection has
// authenticated (Kafka's sasl.server.max.receive.size): an
// unauthenticated client cannot make the broker allocate more
// (CVE-2022-34917).
const maxPreAuthFrame = 512 << 10

// saslState is a connection's SASL progress (reader goroutine only).
type saslState struct {
	// mech is the mechanism SaslHandshake chose for the exchange in
	// progress ("" between exchanges); ex is that exchange.
	mech string
	ex   security.Exchange
	// authenticated is set once an exchange succeeded; authMech is its
	// mechanism (a re-authentication must use the same one).
	authenticated bool
	authMech      string
	// expires is when the session ends (KIP-368; zero: never).
	expires time.Time
	// counted: this exchange's failure is already counted and logged.
	counted bool
	// raw is set after a SaslHandshake v0: the exchange's tokens come
	// as bare frames, not SaslAuthenticate requests (Kafka before 1.0,
	// and clients such as kafka-python that still speak it).
	raw bool
}

// handleRawSASL takes one bare token of a v0 exchange. A failure
// closes the connection without an answer (v0 has no error to carry),
// after the failure delay; success answers the server's token (empty
// for PLAIN) as a bare frame.
func (c *conn) handleRawSASL(token []byte) (*pending, bool) {
	out, done, err := c.sasl.ex.Step(token)
	if err != nil {
		c.b.metrics.AuthFailures.Inc()
		c.lg.Info("closing connection: SASL authentication failed", zap.String("mechanism", c.sasl.mech), zap.String("listener", c.ln.name))
		time.Sleep(c.ln.failDelay)
		return nil, false
	}
	p := &pending{raw: out} // a nil resp: writeLoop sends raw as a bare frame, even empty
	if done {
		if err := c.authenticated(); err != nil {
			c.lg.Info("closing connection: "+err.Error(), zap.String("listener", c.ln.name))
			return nil, false
		}
	}
	return p, true
}

// authenticated ends a successful exchange: the connection's principal
// becomes its user (a re-authentication must keep it) and its session
// starts (connections.max.reauth.ms).
func (c *conn) authenticated() error {
	principal := "User:" + c.sasl.ex.User()
	if c.sasl.authenticated && principal != c.principal {
		return fmt.Errorf("cannot change principals during re-authentication from %s: %s", c.principal, principal)
	}
	c.principal = principal
	c.sasl.authenticated, c.sasl.authMech = true, c.sasl.mech
	if c.ln.reauth > 0 {
		c.sasl.expires = time.Now().Add(c.ln.reauth)
		// A token's session ends with the token (KIP-368).
		if t, ok := c.sasl.ex.(interface{ Expires() time.Time }); ok && t.Expires().Before(c.sasl.expires) {
			c.sasl.expires = t.Expires()
		}
	}
	c.sasl.mech, c.sasl.ex, c.sasl.raw, c.sasl.counted = "", nil, false, false
	return nil
}

// mayManageCredentials reports whether c may call the SCRAM credential
// APIs: with the authorizer on, op (Describe or Alter) on the cluster,
// as Kafka; with it off, any client when super.users is unset (Kafka
// without an authorizer), else only a super user, so that setting
// super.users alone already keeps strangers from adding themselves.
func (c *conn) mayManageCredentials(op acl.Operation) bool {
	if c.b.authz != nil {
		return c.mayCluster(op)
	}
	return len(c.b.superUsers) == 0 || c.b.superUsers[c.principal]
}

// maxFrame is the largest request frame c accepts now.
func (c *conn) maxFrame() int32 {
	if c.ln.mechanisms != nil && !c.sasl.authenticated {
		return min(c.b.cfg.MaxRequestBytes, maxPreAuthFrame)
	}
	return c.b.cfg.MaxRequestBytes
}

// saslAllows reports whether a request of key may be served on c now:
// before a SASL connection authenticates, only ApiVersions and
// SaslHandshake (then SaslAuthenticate); once its session expired
// (KIP-368), only a re-authentication. Anything else closes it, as in
// Kafka.
func (c *conn) saslAllows(key int16) bool {
	if c.ln.mechanisms == nil {
		return true
	}
	const apiVersions, saslHandshake, saslAuthenticate = 18, 17, 36
	switch {
	case key == apiVersions || key == saslHandshake:
		return true
	case key == saslAuthenticate:
		return c.sasl.mech != ""
	case !c.sasl.authenticated:
		return false
	case !c.sasl.expires.IsZero() && !time.Now().Before(c.sasl.expires):
		c.lg.Info("closing connection: SASL session expired (connections.max.reauth.ms)", zap.String("principal", c.principal))
		return false
	}
	return c.sasl.mech == "" // not in the middle of a re-authentication
}
