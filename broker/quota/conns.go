package quota

import "sync"

// ConnCounts counts open connections, in total and per IP, for the
// connection limits the root's accept loop applies (max.connections,
// max.connections.per.ip). Its mutex is a leaf.
type ConnCounts struct {
	mu    sync.Mutex
	total int
	perIP map[string]int
	freed chan struct{} // signalled (non-blocking) when one closes
}

func newConnCounts() *ConnCounts {
	return &ConnCounts{perIP: map[string]int{}, freed: make(chan struct{}, 1)}
}

// Open is the number of open connections.
func (cc *ConnCounts) Open() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.total
}

// FromIP is the number of open connections from ip.
func (cc *ConnCounts) FromIP(ip string) int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.perIP[ip]
}

// Add counts a connection from ip as open.
func (cc *ConnCounts) Add(ip string) {
	cc.mu.Lock()
	cc.total++
	cc.perIP[ip]++
	cc.mu.Unlock()
}

// Release undoes Add when the connection ends, and signals Freed.
func (cc *ConnCounts) Release(ip string) {
	cc.mu.Lock()
	cc.total--
	if cc.perIP[ip]--; cc.perIP[ip] <= 0 {
		delete(cc.perIP, ip)
	}
	cc.mu.Unlock()
	select {
	case cc.freed <- struct{}{}:
	default:
	}
}

// Freed is signalled (at most one pending signal) when a connection is
// released.
func (cc *ConnCounts) Freed() <-chan struct{} { return cc.freed }
