// Package faultproxy is a fault-injecting TCP proxy for Kafka
// connections, for tests that put it between real clients and a real
// broker (the broker advertising the proxy's address, so clients reach
// every broker through it).
//
// The proxy understands Kafka's framing (a 4-byte big-endian size, then
// the request or response) and matches each response to its request by
// correlation id, so a fault can land at a chosen point of an exchange:
//
//   - LoseRequest: a prefix of the request (maybe none of it) reaches the
//     broker, then the connection closes; the broker never handles it.
//   - LoseResponse: the request reaches the broker, which handles it; its
//     response is dropped and the connection closes before the client
//     reads any of it.
//   - CutResponse: a prefix of the response reaches the client, then the
//     connection closes.
//   - HoldResponse: the response reaches the client Hold late (past the
//     client's request timeout, typically).
//   - Close: the connection closes at once, wherever the exchange is.
//
// Faults come from three sources: every connection cut once it reaches a
// random age (Faults.CutMin..CutMax, the way the landing is chosen from
// CutActions), a fraction of the exchanges of chosen APIs (Rate, Keys,
// Actions), and a delay on every frame forwarded (DelayMin..DelayMax).
// Refuse closes new connections at once for a while. All choices come
// from one seeded generator, faults are bounded in time (Faults.For),
// and the proxy listens and dials on loopback only.
package faultproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Action is what a fault does to one exchange.
type Action int

const (
	None Action = iota
	Close
	LoseRequest
	LoseResponse
	CutResponse
	HoldResponse
)

var actionNames = [...]string{"none", "close", "lose-request", "lose-response", "cut-response", "hold-response"}

func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Faults say what the proxy does to the connections it forwards.
type Faults struct {
	// CutMin and CutMax, if CutMax is set, bound the age at which every
	// connection is cut: each draws its own, uniformly. A connection
	// open when the faults are set draws its age from then.
	CutMin, CutMax time.Duration
	// CutActions are how an age cut lands, one chosen uniformly per cut
	// (list one several times to weight it). Empty: Close, LoseRequest,
	// LoseResponse and CutResponse. A cut waiting for an exchange
	// (anything but Close) closes anyway if none comes within a second.
	CutActions []Action

	// Rate is the chance that an exchange of an API in Keys (all APIs if
	// Keys is empty) gets a fault, one of Actions chosen uniformly
	// (empty: LoseRequest, LoseResponse, CutResponse).
	Rate    float64
	Keys    []int16
	Actions []Action
	// Hold is how late HoldResponse delivers (default 1 s).
	Hold time.Duration

	// DelayMin and DelayMax, if DelayMax is set, delay every frame
	// forwarded, either way, by a uniform random duration.
	DelayMin, DelayMax time.Duration

	// For, if set, ends the faults this long after they are set.
	For time.Duration
}

// Stats count what the proxy did.
type Stats struct {
	Conns, Refused int64
	// Exchanges counts requests forwarded whole.
	Exchanges int64
	// Faults counts the faults by action; ByKey by action and the API
	// key of the exchange hit (-1: none, a Close between exchanges).
	Faults map[Action]int64
	ByKey  map[Action]map[int16]int64
}

func (s Stats) String() string {
	return fmt.Sprintf("%d connections (%d refused), %d exchanges, faults %v", s.Conns, s.Refused, s.Exchanges, s.Faults)
}

// Proxy forwards connections to one target.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu         sync.Mutex
	rng        *rand.Rand
	faults     Faults
	keys       map[int16]bool
	gen        uint64 // Set calls: a timer of older faults does nothing
	until      time.Time
	refuseTill time.Time
	next       map[int16][]nextFault // Next's one-shot faults, by API key
	conns      map[*conn]struct{}
	closed     bool

	nConns, nRefused, nExchanges atomic.Int64
	statsMu                      sync.Mutex
	byKey                        map[Action]map[int16]int64
}

// New listens on a free port of 127.0.0.1, so a broker can be told to
// advertise Addr before it starts; Start then forwards to it.
func New(seed uint64) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &Proxy{ln: ln, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		conns: map[*conn]struct{}{}, byKey: map[Action]map[int16]int64{}}, nil
}

// Start forwards connections to target, which must be a loopback
// address, without faults until Set.
func (p *Proxy) Start(target string) error {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("faultproxy: target %s is not a loopback address", target)
	}
	p.target = target
	p.wg.Go(p.accept)
	return nil
}

// Addr is the proxy's listening address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set replaces the faults; Set(Faults{}) stops them.
func (p *Proxy) Set(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
	p.gen++
	p.keys = nil
	if len(f.Keys) > 0 {
		p.keys = map[int16]bool{}
		for _, k := range f.Keys {
			p.keys[k] = true
		}
	}
	p.until = time.Time{}
	if f.For > 0 {
		p.until = time.Now().Add(f.For)
	}
	for c := range p.conns {
		p.armLocked(c)
	}
}

type nextFault struct {
	act  Action
	hold time.Duration
}

// Next makes the next exchange of API key (on any connection) get act,
// once, whatever the faults; several calls queue. For HoldResponse, hold
// is how late the response arrives. A scripted test uses it to land one
// fault exactly where it wants.
func (p *Proxy) Next(key int16, act Action, hold time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == nil {
		p.next = map[int16][]nextFault{}
	}
	p.next[key] = append(p.next[key], nextFault{act, hold})
}

// Pending reports how many faults queued by Next have not landed yet.
func (p *Proxy) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, q := range p.next {
		n += len(q)
	}
	return n
}

// Refuse closes every connection made in the next d at once.
func (p *Proxy) Refuse(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuseTill = time.Now().Add(d)
}

// CutAll closes every open connection.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	cs := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		p.count(Close, -1)
		c.close()
	}
}

// Stats returns what the proxy did so far.
func (p *Proxy) Stats() Stats {
	s := Stats{Conns: p.nConns.Load(), Refused: p.nRefused.Load(), Exchanges: p.nExchanges.Load(),
		Faults: map[Action]int64{}, ByKey: map[Action]map[int16]int64{}}
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	for a, m := range p.byKey {
		s.ByKey[a] = map[int16]int64{}
		for k, n := range m {
			s.ByKey[a][k] = n
			s.Faults[a] += n
		}
	}
	return s
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.CutAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) count(a Action, key int16) {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	m := p.byKey[a]
	if m == nil {
		m = map[int16]int64{}
		p.byKey[a] = m
	}
	m[key]++
}

// activeLocked reports whether faults are on. p.mu held.
func (p *Proxy) activeLocked() bool {
	return p.until.IsZero() || time.Now().Before(p.until)
}

func (p *Proxy) accept() {
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed || time.Now().Before(p.refuseTill) {
			p.mu.Unlock()
			p.nRefused.Add(1)
			if tc, ok := nc.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, as a refusing host's
			}
			nc.Close()
			continue
		}
		c := &conn{p: p, client: nc, rng: rand.New(rand.NewPCG(p.rng.Uint64(), p.rng.Uint64())), corrs: map[int32]int16{}}
		p.conns[c] = struct{}{}
		p.armLocked(c)
		p.mu.Unlock()
		p.nConns.Add(1)
		p.wg.Go(c.serve)
	}
}

// armLocked gives c its cut age under the current faults. p.mu held.
func (p *Proxy) armLocked(c *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	f := p.faults
	if f.CutMax <= 0 || !p.activeLocked() {
		return
	}
	age := f.CutMin
	if f.CutMax > f.CutMin {
		age += time.Duration(c.rng.Int64N(int64(f.CutMax - f.CutMin)))
	}
	acts := f.CutActions
	if len(acts) == 0 {
		acts = []Action{Close, LoseRequest, LoseResponse, CutResponse}
	}
	act := acts[c.rng.IntN(len(acts))]
	gen := p.gen
	c.timer = time.AfterFunc(age, func() { p.cut(c, act, gen) })
}

// cut lands an age cut on c: at once (Close), or on its next exchange.
func (p *Proxy) cut(c *conn, act Action, gen uint64) {
	if !p.current(gen) {
		return
	}
	if act == Close {
		p.count(Close, -1)
		c.close()
		return
	}
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return
	}
	c.pending, c.pendingGen = act, gen
	c.mu.Unlock()
	time.AfterFunc(time.Second, func() {
		c.mu.Lock()
		waiting := c.pending != None && !c.done
		c.mu.Unlock()
		if waiting && p.current(gen) {
			p.count(Close, -1)
			c.close()
		}
	})
}

// current reports whether the faults of Set call gen are still on.
func (p *Proxy) current(gen uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen == gen && p.activeLocked()
}

// frameFault picks the fault, if any, for an exchange of key. The
// pending age cut comes first, then a fault queued by Next.
func (p *Proxy) frameFault(c *conn, key int16) (Action, time.Duration) {
	c.mu.Lock()
	a, gen := c.pending, c.pendingGen
	c.pending = None
	c.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.faults
	hold := f.Hold
	if hold <= 0 {
		hold = time.Second
	}
	if a != None && p.gen == gen && p.activeLocked() {
		return a, hold // an age cut, still under the faults that armed it
	}
	if q := p.next[key]; len(q) > 0 {
		p.next[key] = q[1:]
		return q[0].act, q[0].hold
	}
	if f.Rate <= 0 || !p.activeLocked() || (p.keys != nil && !p.keys[key]) {
		return None, 0
	}
	acts := f.Actions
	if len(acts) == 0 {
		acts = []Action{LoseRequest, LoseResponse, CutResponse}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rng.Float64() >= f.Rate {
		return None, 0
	}
	return acts[c.rng.IntN(len(acts))], hold
}

// delay is how long the next frame waits before it is forwarded.
func (p *Proxy) delay(c *conn) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.faults
	if f.DelayMax <= 0 || !p.activeLocked() {
		return 0
	}
	d := f.DelayMin
	if f.DelayMax > f.DelayMin {
		c.mu.Lock()
		d += time.Duration(c.rng.Int64N(int64(f.DelayMax - f.DelayMin)))
		c.mu.Unlock()
	}
	return d
}

// conn is one proxied connection.
type conn struct {
	p      *Proxy
	client net.Conn

	mu      sync.Mutex
	rng     *rand.Rand
	server  net.Conn
	timer   *time.Timer
	pending Action // an age cut waiting for the next exchange
	// pendingGen is the Set call whose faults armed pending.
	pendingGen uint64
	corrs      map[int32]int16 // correlation id → API key, of requests forwarded
	// doomed are the correlation ids whose responses get a fault.
	doomed map[int32]doom
	done   bool
}

type doom struct {
	act  Action
	hold time.Duration
}

func (c *conn) close() {
	c.mu.Lock()
	c.done = true
	if c.timer != nil {
		c.timer.Stop()
	}
	srv := c.server
	c.mu.Unlock()
	c.client.Close()
	if srv != nil {
		srv.Close()
	}
}

func (c *conn) serve() {
	defer func() {
		c.close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	}()
	srv, err := net.DialTimeout("tcp", c.p.target, 5*time.Second)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.server = srv
	done := c.done
	c.mu.Unlock()
	if done {
		srv.Close()
		return
	}
	c.p.wg.Go(func() {
		defer c.close()
		c.requests(srv)
	})
	c.responses(srv)
}

// prefix returns a random prefix of f: none of it up to all but one byte.
func (c *conn) prefix(f []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return f[:c.rng.IntN(len(f))]
}

// requests forwards the client's requests to the broker.
func (c *conn) requests(srv net.Conn) {
	for {
		f, err := readFrame(c.client)
		if err != nil {
			return
		}
		if len(f) < 12 {
			// Not a request header: forward it, let the broker judge.
			if _, err := srv.Write(f); err != nil {
				return
			}
			continue
		}
		key := int16(binary.BigEndian.Uint16(f[4:6]))
		corr := int32(binary.BigEndian.Uint32(f[8:12]))
		act, hold := c.p.frameFault(c, key)
		if act == Close || act == LoseRequest {
			c.p.count(act, key)
			if act == LoseRequest {
				_, _ = srv.Write(c.prefix(f))
			}
			return
		}
		c.mu.Lock()
		c.corrs[corr] = key
		if act != None {
			if c.doomed == nil {
				c.doomed = map[int32]doom{}
			}
			c.doomed[corr] = doom{act, hold}
		}
		c.mu.Unlock()
		if d := c.p.delay(c); d > 0 {
			time.Sleep(d)
		}
		if _, err := srv.Write(f); err != nil {
			return
		}
		c.p.nExchanges.Add(1)
	}
}

// responses forwards the broker's responses to the client.
func (c *conn) responses(srv net.Conn) {
	for {
		f, err := readFrame(srv)
		if err != nil {
			return
		}
		key, act := int16(-1), None
		var hold time.Duration
		if len(f) >= 8 {
			corr := int32(binary.BigEndian.Uint32(f[4:8]))
			c.mu.Lock()
			if k, ok := c.corrs[corr]; ok {
				key = k
				delete(c.corrs, corr)
			}
			if d, ok := c.doomed[corr]; ok {
				act, hold = d.act, d.hold
				delete(c.doomed, corr)
			}
			c.mu.Unlock()
		}
		switch act {
		case LoseResponse:
			c.p.count(act, key)
			return
		case CutResponse:
			c.p.count(act, key)
			_, _ = c.client.Write(c.prefix(f))
			return
		case HoldResponse:
			c.p.count(act, key)
			time.Sleep(hold)
		}
		if d := c.p.delay(c); d > 0 {
			time.Sleep(d)
		}
		if _, err := c.client.Write(f); err != nil {
			return
		}
	}
}

// maxFrame bounds a frame the proxy reads; a larger size closes the
// connection (the broker would refuse it too).
const maxFrame = 256 << 20

var errFrameTooLarge = errors.New("faultproxy: frame too large")

// readFrame reads one size-prefixed frame, size included.
func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return nil, errFrameTooLarge
	}
	buf := make([]byte, 4+size)
	copy(buf, n[:])
	_, err := io.ReadFull(r, buf[4:])
	return buf, err
}
