package broker

// Connection limits, applied by the accept loop (broker.go):
//
//   - max.connections (Kafka's broker config): at the limit the broker
//     stops accepting until a connection closes, as Kafka's acceptor
//     does; clients wait in the listen backlog.
//   - max.connections.per.ip (Kafka's): a connection beyond it is closed
//     at once, before any request is read.
//   - connection_creation_rate on the ip entity (Kafka's quota key,
//     KIP-612): new connections per second from one address. Over it,
//     the connection is closed, as in Kafka: after the time the rate
//     needs to allow another one (throttle mode; the client's reconnect
//     backs off) or at once (quota_mode=1).

import (
	"net"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/quota"
)

func (b *Broker) brokerConfigInt(name string) int64 {
	v, _ := b.brokerConfig(name)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && v != "" {
		return n
	}
	for _, d := range quotaBrokerConfigDefs {
		if d.name == name {
			return d.def
		}
	}
	return 0
}

// waitConnSlot blocks the accept loop, holding the connection just
// accepted unserved, while max.connections are open.
// It returns false when the broker is closing.
func (b *Broker) waitConnSlot() bool {
	cc := b.quotas.Conns()
	for {
		if int64(cc.Open()) < b.brokerConfigInt("max.connections") {
			return true
		}
		t := time.NewTimer(100 * time.Millisecond) // the limit may be raised meanwhile
		select {
		case <-cc.Freed():
		case <-t.C:
		case <-b.ctx.Done():
			t.Stop()
			return false
		}
		t.Stop()
	}
}

// admitConn applies max.connections.per.ip and connection_creation_rate
// to a new connection. If it returns false the connection is not served
// and admitConn has closed it, or will after a throttle delay.
func (b *Broker) admitConn(nc net.Conn) bool {
	ip := remoteIP(nc)
	cc := b.quotas.Conns()
	if int64(cc.FromIP(ip)) >= b.brokerConfigInt("max.connections.per.ip") {
		b.lg.Info("closing connection: max.connections.per.ip reached", zap.String("ip", ip))
		nc.Close()
		return false
	}
	limits := b.quotas.ClientLimits(nil, quota.ConnectionCreationRate, quota.Ident{IP: ip}, 1)
	if len(limits) > 0 {
		now := time.Now()
		rejected, wait := b.quotas.Debt(now, limits)
		if wait > 0 {
			b.lg.Info("closing connection: connection_creation_rate exceeded", zap.String("ip", ip), zap.Bool("reject", rejected))
			if rejected {
				nc.Close()
			} else {
				b.goroutine(func() {
					t := time.NewTimer(wait)
					defer t.Stop()
					select {
					case <-t.C:
					case <-b.ctx.Done():
					}
					nc.Close()
				})
			}
			return false
		}
		for i := range limits {
			limits[i].Reject = false
		}
		b.quotas.Charge(now, limits)
	}
	cc.Add(ip)
	return true
}

// connReleased undoes admitConn's count when a connection ends.
func (b *Broker) connReleased(c *conn) {
	b.quotas.Conns().Release(c.quota.ip)
}
