package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/security"
)

// tlsHandshakeTimeout bounds a TLS handshake; a client that does not
// finish it in time is closed.
const tlsHandshakeTimeout = 10 * time.Second

// listener is one bound Kafka listener.
type listener struct {
	name  string
	proto security.Protocol
	ln    net.Listener
	tls   *security.ServerTLS // nil unless proto is SSL or SASL_SSL
	// advHost and advPort are what Metadata, FindCoordinator and
	// DescribeCluster give clients that came in on this listener.
	advHost string
	advPort int32
	// advertised is set when advertised.listeners names this listener.
	advertised *security.Endpoint
	// mechanisms are the SASL mechanisms enabled (nil: not SASL);
	// reauth is connections.max.reauth.ms, failDelay
	// connection.failed.authentication.delay.ms.
	mechanisms []string
	reauth     time.Duration
	failDelay  time.Duration
	oauth      *security.OAuthBearer // set when OAUTHBEARER is enabled
}

// listenerSpec is one listener as configured, before binding.
type listenerSpec struct {
	ep         security.Endpoint
	proto      security.Protocol
	advertised *security.Endpoint
}

// listenerPlan resolves the listener configs: Listeners (else one
// PLAINTEXT listener on ListenAddr), their protocols, their advertised
// endpoints, and the security configs they need.
func (c *Config) listenerPlan() ([]listenerSpec, error) {
	spec := c.Listeners
	if spec == "" {
		spec = "PLAINTEXT://" + c.ListenAddr
	}
	eps, err := security.ParseEndpoints(spec)
	if err != nil {
		return nil, fmt.Errorf("broker: listeners: %w", err)
	}
	protos := security.DefaultProtocolMap()
	if c.ListenerProtocols != "" {
		if protos, err = security.ParseProtocolMap(c.ListenerProtocols); err != nil {
			return nil, fmt.Errorf("broker: listener.security.protocol.map: %w", err)
		}
	}
	var adv map[string]security.Endpoint
	switch {
	case c.AdvertisedListeners != "":
		advs, err := security.ParseEndpoints(c.AdvertisedListeners)
		if err != nil {
			return nil, fmt.Errorf("broker: advertised.listeners: %w", err)
		}
		adv = map[string]security.Endpoint{}
		for _, a := range advs {
			adv[a.Name] = a
		}
	case c.AdvertisedAddr != "":
		a, err := security.ParseEndpoints(c.AdvertisedAddr)
		if err != nil {
			return nil, fmt.Errorf("broker: advertised address: %w", err)
		}
		adv = map[string]security.Endpoint{eps[0].Name: a[0]}
	}
	names := map[string]bool{}
	for _, ep := range eps {
		names[ep.Name] = true
	}
	if c.Voters != "" {
		names[security.PeerListener] = true // listener.name.peer.ssl.*
	}
	if err := security.Settings(c.Security).Validate(names); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if v, ok := c.Security["listener.name.peer.ssl.client.auth"]; ok && !strings.EqualFold(strings.TrimSpace(v), string(security.ClientAuthRequired)) {
		return nil, fmt.Errorf("broker: listener.name.peer.ssl.client.auth=%s: peers always authenticate each other (required)", v)
	}
	if c.Voters != "" && security.PeerTLS(c.Security) {
		if err := security.CheckServerTLS(security.PeerSettings(c.Security), security.PeerListener); err != nil {
			return nil, fmt.Errorf("broker: %s=SSL: %w", security.PeerSecurityProtocol, err)
		}
		pp, _ := security.ParsePeerPrincipals(security.Settings(c.Security).For("", security.PeerPrincipals)) // checked by Validate
		voters, _ := ParseVoters(c.Voters)
		switch su, _ := security.ParseSuperUsers(security.Settings(c.Security).For("", "super.users")); {
		case len(pp) > 0:
			for id := range voters {
				if pp[id] == "" {
					return nil, fmt.Errorf("broker: %s names no principal for voter %d", security.PeerPrincipals, id)
				}
			}
		case len(su) == 0:
			return nil, fmt.Errorf("broker: %s=SSL accepts only peers whose certificate principal is in %s or, without it, among super.users; both are empty: name the brokers' principals (User:CN=...)", security.PeerSecurityProtocol, security.PeerPrincipals)
		}
	}
	var out []listenerSpec
	for _, ep := range eps {
		p, ok := protos[ep.Name]
		if !ok {
			return nil, fmt.Errorf("broker: listener %s has no security protocol in listener.security.protocol.map", ep.Name)
		}
		if p.SASL() {
			mechs, err := security.EnabledMechanisms(c.Security, ep.Name, p.TLS())
			if err != nil {
				return nil, fmt.Errorf("broker: %w", err)
			}
			if slices.Contains(mechs, security.OAuthBearerMechanism) {
				if err := security.CheckOAuthBearer(c.Security, ep.Name); err != nil {
					return nil, fmt.Errorf("broker: %w", err)
				}
			}
		}
		if p.TLS() {
			if err := security.CheckServerTLS(c.Security, ep.Name); err != nil {
				return nil, fmt.Errorf("broker: %w", err)
			}
		}
		s := listenerSpec{ep: ep, proto: p}
		if a, ok := adv[ep.Name]; ok {
			if a.Port == 0 {
				return nil, fmt.Errorf("broker: advertised listener %s: port 0 cannot be advertised", a.Name)
			}
			s.advertised = &a
		}
		out = append(out, s)
	}
	for name := range adv {
		if !names[name] {
			return nil, fmt.Errorf("broker: advertised.listeners names %s, which is not in listeners", name)
		}
	}
	return out, nil
}

// listen binds every listener (closing the ones bound if one fails).
func (b *Broker) listen() error {
	specs, err := b.cfg.listenerPlan()
	if err != nil {
		return err
	}
	for _, s := range specs {
		l := &listener{name: s.ep.Name, proto: s.proto, advertised: s.advertised}
		warn := func(msg string, err error) { b.lg.Warn(msg, zap.String("listener", l.name), zap.Error(err)) }
		if s.proto.TLS() {
			if l.tls, err = security.NewServerTLS(b.cfg.Security, l.name, warn); err != nil {
				b.closeListeners()
				return fmt.Errorf("broker: %w", err)
			}
		}
		if s.proto.SASL() {
			sec := security.Settings(b.cfg.Security)
			l.mechanisms, _ = security.EnabledMechanisms(sec, l.name, s.proto.TLS()) // checked by listenerPlan
			l.reauth = time.Duration(sec.Millis(l.name, "connections.max.reauth.ms")) * time.Millisecond
			l.failDelay = time.Duration(sec.Millis(l.name, "connection.failed.authentication.delay.ms")) * time.Millisecond
			if slices.Contains(l.mechanisms, security.OAuthBearerMechanism) {
				if l.oauth, err = security.NewOAuthBearer(sec, l.name, warn); err != nil {
					b.closeListeners()
					return fmt.Errorf("broker: %w", err)
				}
			}
		}
		if l.ln, err = net.Listen("tcp", s.ep.Addr()); err != nil {
			b.closeListeners()
			return fmt.Errorf("broker: listen %s: %w", s.ep, err)
		}
		adv := l.ln.Addr().String()
		if s.advertised != nil {
			adv = s.advertised.Addr()
		}
		host, port, _ := net.SplitHostPort(adv)
		p, _ := strconv.Atoi(port)
		l.advHost, l.advPort = host, int32(p)
		b.listeners = append(b.listeners, l)
	}
	return nil
}

func (b *Broker) closeListeners() {
	for _, l := range b.listeners {
		if l.ln != nil {
			l.ln.Close()
		}
	}
}

// Addr is the address the first listener is bound to.
func (b *Broker) Addr() string { return b.listeners[0].ln.Addr().String() }

// ListenerAddr is the address listener name (as configured, any case)
// is bound to, or "" if there is none.
func (b *Broker) ListenerAddr(name string) string {
	for _, l := range b.listeners {
		if strings.EqualFold(l.name, name) {
			return l.ln.Addr().String()
		}
	}
	return ""
}

// describeListeners formats the listeners as Kafka's listeners config
// (bound addresses) and advertised.listeners.
func (b *Broker) describeListeners() (bound, advertised string) {
	var bs, as []string
	for _, l := range b.listeners {
		bs = append(bs, l.name+"://"+l.ln.Addr().String())
		as = append(as, l.name+"://"+net.JoinHostPort(l.advHost, strconv.Itoa(int(l.advPort))))
	}
	return strings.Join(bs, ","), strings.Join(as, ",")
}

// handshake finishes a TLS connection's handshake (bounded by
// tlsHandshakeTimeout and by shutdown) and sets its principal. It
// reports false if the connection must close: a failed handshake (a
// plaintext client on a TLS port fails at its first bytes, before
// anything is allocated for them), a required client certificate
// missing, or a certificate no mapping rule applies to.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	if err := tc.HandshakeContext(c.b.ctx); err != nil {
		var re tls.RecordHeaderError
		switch {
		case errors.As(err, &re):
			c.lg.Info("closing connection: not TLS on a TLS listener", zap.String("listener", c.ln.name))
		case errors.Is(err, os.ErrDeadlineExceeded):
			c.lg.Info("closing connection: TLS handshake timed out", zap.String("listener", c.ln.name))
		default:
			c.lg.Info("closing connection: TLS handshake failed", zap.String("listener", c.ln.name), zap.Error(err))
		}
		return false
	}
	tc.SetDeadline(time.Time{})
	p, err := c.ln.tls.Principal(tc.ConnectionState())
	if err != nil {
		c.b.metrics.AuthFailures.Inc()
		c.lg.Warn("closing connection: client certificate refused", zap.String("listener", c.ln.name), zap.Error(err))
		return false
	}
	c.principal = p
	return true
}
