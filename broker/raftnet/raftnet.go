package raftnet

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

const (
	magic   = "SHRN"
	version = 1
	// MaxFrame bounds one frame: a raft append message carries at most
	// MaxSizePerMsg of entries (1 MiB) plus its envelope.
	MaxFrame = 64 << 20
	// maxGroup bounds a group name (a topic name is at most 249 bytes).
	maxGroup = 1024
	// DefaultQueueBytes bounds what waits for one peer's connection.
	DefaultQueueBytes = 64 << 20
)

// Handler receives a message from peer from for group. It runs on the
// connection's reader goroutine and must not block for long; data is
// the handler's to keep.
type Handler func(group string, from uint64, data []byte)

// Config configures a Transport.
type Config struct {
	NodeID    uint64
	ClusterID string
	// Listen is the peer listener's address (shoal.peer.listen);
	// port 0 picks one (Addr tells which). Listener, when set, is used
	// instead.
	Listen   string
	Listener net.Listener
	// Peers maps every other node's id to its peer address.
	Peers   map[uint64]string
	Handler Handler
	// QueueBytes bounds each peer's queue (DefaultQueueBytes if zero).
	QueueBytes int
	Logger     *zap.Logger
	// Dial opens a connection (net.Dialer's DialContext by default;
	// tests put a fault-injecting proxy in between by address instead).
	Dial func(address string) (net.Conn, error)
	// TLS, when set, secures every connection with mutual TLS.
	TLS *TLSConfig
}

// TLSConfig is the peer network's mutual TLS: each end of a connection
// proves itself with a certificate the other verifies, and must pass
// Verify for the node it is (the dialed peer; the one an inbound
// connection's hello names) before any frame is taken.
type TLSConfig struct {
	// Server serves accepted connections; it must require and verify
	// client certificates.
	Server *tls.Config
	// Client returns the configuration to dial serverName (the peer
	// address's host) with: this broker's certificate, and the CAs the
	// peer's is verified against.
	Client func(serverName string) *tls.Config
	// Verify checks that the other end's verified certificate is node's.
	Verify func(cs tls.ConnectionState, node uint64) error
}

// handshakeTimeout bounds a connection's TLS handshake and hello.
const handshakeTimeout = 10 * time.Second

// secure runs the TLS handshake on conn (server or client side); the
// client side checks that the server is node. conn is closed on
// failure.
func (t *Transport) secure(conn net.Conn, server bool, addr string, node uint64) (*tls.Conn, error) {
	var tc *tls.Conn
	if server {
		tc = tls.Server(conn, t.cfg.TLS.Server)
	} else {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		tc = tls.Client(conn, t.cfg.TLS.Client(host))
	}
	ctx, cancel := context.WithTimeout(t.ctx, handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	if !server && t.cfg.TLS.Verify != nil {
		if err := t.cfg.TLS.Verify(tc.ConnectionState(), node); err != nil {
			_ = tc.Close()
			return nil, err
		}
	}
	return tc, nil
}

// Transport is one broker's end of the peer network.
type Transport struct {
	cfg    Config
	ln     net.Listener
	logger *zap.Logger
	ctx    context.Context // cancelled by Close: ends handshakes under way
	cancel context.CancelFunc

	mu      sync.Mutex
	peers   map[uint64]*peer
	inbound map[net.Conn]struct{}
	closed  bool
	done    chan struct{} // closed by Close
	wg      sync.WaitGroup
}

// peer is the outbound side towards one node.
type peer struct {
	t    *Transport
	id   uint64
	addr string

	mu     sync.Mutex
	cond   *sync.Cond
	queue  [][][]byte // frames: a header, then the message's parts
	bytes  int
	conn   net.Conn
	closed bool
	// dropped counts messages refused by a full queue or lost with a
	// broken connection (for the logs and metrics).
	dropped int
}

// Start listens on cfg.Listen and starts the peers' writers.
func Start(cfg Config) (*Transport, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.QueueBytes == 0 {
		cfg.QueueBytes = DefaultQueueBytes
	}
	if cfg.Dial == nil {
		cfg.Dial = func(address string) (net.Conn, error) {
			return net.DialTimeout("tcp", address, 3*time.Second)
		}
	}
	if len(cfg.ClusterID) > maxGroup {
		return nil, fmt.Errorf("raftnet: cluster id of %d bytes", len(cfg.ClusterID))
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("raftnet: listen on %s: %w", cfg.Listen, err)
		}
	}
	t := &Transport{cfg: cfg, ln: ln, logger: cfg.Logger.Named("raftnet"), peers: map[uint64]*peer{}, inbound: map[net.Conn]struct{}{},
		done: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	for id, addr := range cfg.Peers {
		if id == cfg.NodeID {
			continue
		}
		p := &peer{t: t, id: id, addr: addr}
		p.cond = sync.NewCond(&p.mu)
		t.peers[id] = p
		t.wg.Add(1)
		go p.run()
	}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// Addr is the peer listener's address.
func (t *Transport) Addr() net.Addr { return t.ln.Addr() }

// Send queues a message for group's replica on node to: the
// concatenation of data, whose slices are sent as they are, not copied
// (the caller must not change them). It never blocks; it returns false
// when the message was dropped (unknown node, queue full, transport
// closed).
func (t *Transport) Send(group string, to uint64, data ...[]byte) bool {
	t.mu.Lock()
	p := t.peers[to]
	t.mu.Unlock()
	size := 0
	for _, d := range data {
		size += len(d)
	}
	if p == nil || len(group) > maxGroup || 2+len(group)+size > MaxFrame {
		return false
	}
	head := make([]byte, 0, 4+2+len(group))
	head = binary.BigEndian.AppendUint32(head, uint32(2+len(group)+size))
	head = binary.BigEndian.AppendUint16(head, uint16(len(group)))
	head = append(head, group...)
	f := make([][]byte, 0, 1+len(data))
	f = append(append(f, head), data...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.bytes+len(head)+size > p.t.cfg.QueueBytes {
		p.dropped++
		return false
	}
	p.queue = append(p.queue, f)
	p.bytes += len(head) + size
	p.cond.Signal()
	return true
}

// Close stops the listener, the writers and the readers, and waits for
// their goroutines.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.done)
	t.cancel()
	err := t.ln.Close()
	for c := range t.inbound {
		_ = c.Close()
	}
	peers := t.peers
	t.mu.Unlock()
	for _, p := range peers {
		p.mu.Lock()
		p.closed = true
		if p.conn != nil {
			_ = p.conn.Close()
		}
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	t.wg.Wait()
	return err
}

// run is a peer's writer: dial, hello, then frames until the
// connection breaks; redial with backoff.
func (p *peer) run() {
	defer p.t.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		if !p.waitWork() {
			return
		}
		conn, err := p.t.cfg.Dial(p.addr)
		if err == nil && p.t.cfg.TLS != nil {
			if conn, err = p.t.secure(conn, false, p.addr, p.id); err != nil {
				p.t.logger.Warn("peer connection refused", zap.Uint64("peer", p.id), zap.String("addr", p.addr), zap.Error(err))
			}
		}
		if err == nil {
			start := time.Now()
			err = p.serve(conn)
			if time.Since(start) > time.Second {
				// It worked for a while: redial at once. One that breaks
				// at once (a peer that refused this broker's certificate
				// after a TLS 1.3 handshake looked complete here) backs off.
				backoff = 50 * time.Millisecond
			}
		}
		if p.isClosed() {
			return
		}
		p.t.logger.Debug("peer connection down", zap.Uint64("peer", p.id), zap.String("addr", p.addr), zap.Error(err))
		p.sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// waitWork waits until there is something to send; false once closed.
func (p *peer) waitWork() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.queue) == 0 && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

func (p *peer) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// sleep waits d, or less if the transport closes.
func (p *peer) sleep(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-p.t.done:
	}
}

// serve writes the hello and then queued frames on conn until an error.
// What a broken connection held is lost (raft resends).
func (p *peer) serve(conn net.Conn) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = conn.Close()
		return nil
	}
	p.conn = conn
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.conn = nil
		p.mu.Unlock()
		_ = conn.Close()
	}()
	w := bufio.NewWriterSize(conn, 64<<10)
	hello := append([]byte(magic), version)
	hello = binary.BigEndian.AppendUint16(hello, uint16(len(p.t.cfg.ClusterID)))
	hello = append(hello, p.t.cfg.ClusterID...)
	hello = binary.BigEndian.AppendUint64(hello, p.t.cfg.NodeID)
	hello = binary.BigEndian.AppendUint64(hello, p.id)
	if _, err := w.Write(hello); err != nil {
		return err
	}
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.closed {
			p.mu.Unlock()
			if err := w.Flush(); err != nil { // the queue ran dry: send what accumulated
				return err
			}
			p.mu.Lock()
			for len(p.queue) == 0 && !p.closed {
				p.cond.Wait()
			}
		}
		if p.closed {
			p.mu.Unlock()
			return nil
		}
		batch := p.queue
		p.queue, p.bytes = nil, 0
		p.mu.Unlock()
		for i, f := range batch {
			for _, part := range f {
				// bufio writes a large part straight to the connection
				// once what it holds is flushed.
				if _, err := w.Write(part); err != nil {
					p.mu.Lock()
					p.dropped += len(batch) - i
					p.mu.Unlock()
					return err
				}
			}
		}
	}
}

// accept takes inbound connections.
func (t *Transport) accept() {
	defer t.wg.Done()
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			t.logger.Warn("peer listener", zap.Error(err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			_ = conn.Close()
			return
		}
		t.inbound[conn] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.read(conn)
	}
}

// read checks an inbound connection's hello and hands its frames to
// the handler until the connection ends or breaks the format.
func (t *Transport) read(conn net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.inbound, conn)
		t.mu.Unlock()
		_ = conn.Close()
	}()
	// A connection has handshakeTimeout for its TLS handshake and hello.
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	rc := conn // what frames are read from (the deferred Close of conn ends it too)
	var tc *tls.Conn
	if t.cfg.TLS != nil {
		var err error
		if tc, err = t.secure(conn, true, "", 0); err != nil {
			t.logger.Warn("refused peer connection", zap.Stringer("remote", conn.RemoteAddr()), zap.Error(err))
			return
		}
		rc = tc
	}
	r := bufio.NewReaderSize(rc, 64<<10)
	from, err := t.hello(r)
	if err == nil && tc != nil && t.cfg.TLS.Verify != nil {
		err = t.cfg.TLS.Verify(tc.ConnectionState(), from) // the certificate must be the node the hello names
	}
	if err != nil {
		t.logger.Warn("refused peer connection", zap.Stringer("remote", conn.RemoteAddr()), zap.Error(err))
		return
	}
	_ = conn.SetDeadline(time.Time{})
	var hdr [6]byte
	for {
		if _, err := io.ReadFull(r, hdr[:4]); err != nil {
			return // closed, or broken: the peer redials
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		if n < 2 || n > MaxFrame {
			t.logger.Warn("bad frame from peer; closing the connection", zap.Uint64("peer", from), zap.Uint32("length", n))
			return
		}
		if _, err := io.ReadFull(r, hdr[4:6]); err != nil {
			return
		}
		g := binary.BigEndian.Uint16(hdr[4:6])
		if uint32(g) > n-2 || g > maxGroup {
			t.logger.Warn("bad frame from peer; closing the connection", zap.Uint64("peer", from), zap.Uint16("group_length", g))
			return
		}
		body := make([]byte, n-2)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		t.cfg.Handler(string(body[:g]), from, body[g:])
	}
}

// hello reads and checks a dialer's hello; it returns the peer's id.
func (t *Transport) hello(r *bufio.Reader) (uint64, error) {
	var head [7]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, err
	}
	if string(head[:4]) != magic || head[4] != version {
		return 0, fmt.Errorf("not a raftnet hello: % x", head[:5])
	}
	n := binary.BigEndian.Uint16(head[5:])
	if int(n) > maxGroup {
		return 0, fmt.Errorf("cluster id of %d bytes", n)
	}
	rest := make([]byte, int(n)+16)
	if _, err := io.ReadFull(r, rest); err != nil {
		return 0, err
	}
	cluster := string(rest[:n])
	from, to := binary.BigEndian.Uint64(rest[n:]), binary.BigEndian.Uint64(rest[n+8:])
	switch {
	case cluster != t.cfg.ClusterID:
		return 0, fmt.Errorf("hello from cluster %q, not %q", cluster, t.cfg.ClusterID)
	case to != t.cfg.NodeID:
		return 0, fmt.Errorf("hello for node %d, this is node %d", to, t.cfg.NodeID)
	}
	if _, ok := t.cfg.Peers[from]; !ok || from == t.cfg.NodeID {
		return 0, fmt.Errorf("hello from unknown node %d", from)
	}
	return from, nil
}
