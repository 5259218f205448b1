package broker

// SaslAuthenticate (36).
//
// Behavior: one step of the exchange SaslHandshake chose. When it
// completes the connection's principal is User:<name>, and with
// connections.max.reauth.ms set the session lasts that long
// (SessionLifetimeMs, KIP-368): the client re-authenticates with a new
// handshake before then, keeping its principal, or its next request
// closes the connection. Bad credentials (an unknown user or a wrong
// password alike, an authorization id naming someone else) get
// SASL_AUTHENTICATION_FAILED after connection.failed.authentication.delay.ms,
// and the connection closes.
//
// Version notes: v1 adds SessionLifetimeMs; v2 is flexible.

import (
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/security"
)

func init() { register(36, 0, 2, handleSaslAuthenticate) }

func handleSaslAuthenticate(c *conn, req *kmsg.SASLAuthenticateRequest) (kmsg.Response, func()) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	mech := c.sasl.mech
	fail := func(msg string) (kmsg.Response, func()) {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = &msg
		c.sasl.mech, c.sasl.ex = "", nil
		c.closeAfterResponse = true
		if !c.sasl.counted {
			c.b.metrics.AuthFailures.Inc()
		}
		c.lg.Info("closing connection: SASL authentication failed", zap.String("mechanism", mech), zap.String("listener", c.ln.name))
		delay := c.ln.failDelay
		return resp, func() { time.Sleep(delay) }
	}
	if c.sasl.ex == nil { // a listener without SASL (saslAllows lets it through)
		resp.ErrorCode = kerr.IllegalSaslState.Code
		c.closeAfterResponse = true
		return resp, nil
	}
	out, done, err := c.sasl.ex.Step(req.SASLAuthBytes)
	if err != nil {
		msg := fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", mech)
		if detail, ok := strings.CutPrefix(err.Error(), security.ErrAuthFailed.Error()+": "); ok {
			msg += ": " + detail // OAUTHBEARER's {"status":"invalid_token"}
		}
		return fail(msg)
	}
	resp.SASLAuthBytes = out
	if !done {
		// A refused token is answered with a challenge first: count and
		// log the refusal now, in case the client goes away without the
		// final step.
		if r, ok := c.sasl.ex.(interface{ Refusal() error }); ok && r.Refusal() != nil && !c.sasl.counted {
			c.sasl.counted = true
			c.b.metrics.AuthFailures.Inc()
			c.lg.Info("SASL token refused", zap.String("mechanism", mech), zap.String("listener", c.ln.name), zap.Error(r.Refusal()))
		}
		return resp, nil
	}
	if err := c.authenticated(); err != nil {
		return fail(err.Error())
	}
	if !c.sasl.expires.IsZero() {
		resp.SessionLifetimeMillis = max(1, time.Until(c.sasl.expires).Milliseconds())
	}
	return resp, nil
}
