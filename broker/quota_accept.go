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
	"sync"
	"time"

	"go.uber.org/zap"
)

// connCounts counts open connections, in total and per IP.
type connCounts struct {
	mu    sync.Mutex
	total int
	perIP map[string]int
	freed chan struct{} // signalled (non-blocking) when one closes
}

func newConnCounts() *connCounts {
	return &connCounts{perIP: map[string]int{}, freed: make(chan struct{}, 1)}
}

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
	cc := b.quotas.conns
	for {
		cc.mu.Lock()
		open := cc.total
		cc.mu.Unlock()
		if int64(open) < b.brokerConfigInt("max.connections") {
			return true
		}
		t := time.NewTimer(100 * time.Millisecond) // the limit may be raised meanwhile
		select {
		case <-cc.freed:
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
	cc := b.quotas.conns
	cc.mu.Lock()
	over := int64(cc.perIP[ip]) >= b.brokerConfigInt("max.connections.per.ip")
	cc.mu.Unlock()
	if over {
		b.lg.Info("closing connection: max.connections.per.ip reached", zap.String("ip", ip))
		nc.Close()
		return false
	}
	limits := b.quotas.clientLimits(nil, qConnectionCreation, clientIdent{ip: ip}, 1)
	if len(limits) > 0 {
		now := time.Now()
		rejected, wait := b.quotas.debt(now, limits)
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
			limits[i].reject = false
		}
		b.quotas.charge(now, limits)
	}
	cc.mu.Lock()
	cc.total++
	cc.perIP[ip]++
	cc.mu.Unlock()
	return true
}

// connReleased undoes admitConn's count when a connection ends.
func (b *Broker) connReleased(c *conn) {
	cc := b.quotas.conns
	cc.mu.Lock()
	cc.total--
	if cc.perIP[c.quota.ip]--; cc.perIP[c.quota.ip] <= 0 {
		delete(cc.perIP, c.quota.ip)
	}
	cc.mu.Unlock()
	select {
	case cc.freed <- struct{}{}:
	default:
	}
}
