package broker

// SaslHandshake (17).
//
// Behavior: on a SASL_PLAINTEXT or SASL_SSL listener, chooses the
// mechanism of the SaslAuthenticate exchange that follows; it lists the
// listener's enabled mechanisms (sasl.enabled.mechanisms). A mechanism
// not enabled is UNSUPPORTED_SASL_MECHANISM and closes the connection.
// A re-authentication (KIP-368) must use the mechanism the connection
// authenticated with. On a listener without SASL it is
// ILLEGAL_SASL_STATE, as in Kafka.
//
// Version notes: after v0 the SASL tokens follow as bare frames
// (length and bytes, no request header; sasl.go's handleRawSASL), after
// v1 as SaslAuthenticate requests. A v0 re-authentication is not
// possible (KIP-368 needs SaslAuthenticate v1).

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/security"
)

func init() { registerSimple(17, 0, 1, handleSaslHandshake) }

func handleSaslHandshake(c *conn, req *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if c.ln.mechanisms == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		c.closeAfterResponse = true
		return resp
	}
	resp.SupportedMechanisms = c.ln.mechanisms
	switch {
	case c.sasl.mech != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code // a second handshake in one exchange
		c.closeAfterResponse = true
	case !slices.Contains(c.ln.mechanisms, req.Mechanism),
		c.sasl.authenticated && req.Mechanism != c.sasl.authMech:
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.closeAfterResponse = true
	default:
		ex, err := security.NewExchange(req.Mechanism, c.b.creds, c.ln.oauth)
		if err != nil {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			c.closeAfterResponse = true
			return resp
		}
		c.sasl.mech, c.sasl.ex = req.Mechanism, ex
		c.sasl.raw = req.Version == 0
		if c.sasl.raw && c.sasl.authenticated {
			resp.ErrorCode = kerr.IllegalSaslState.Code // re-authentication needs v1
			c.closeAfterResponse = true
		}
	}
	return resp
}
