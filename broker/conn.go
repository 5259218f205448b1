package broker

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/security"
	"github.com/shoal-mq/shoal/broker/share"
	"github.com/shoal-mq/shoal/protocol"
)

// maxPipelined bounds the responses a connection may have queued but not
// yet written; the reader stops reading requests when it is reached.
const maxPipelined = 32

// maxQueuedRecordBytes bounds the record data a connection's queued
// responses may hold: while more waits to be written, the reader reads no
// further request. A client that pipelines large fetches and does not read
// the answers so holds about one response in broker memory, not
// maxPipelined of them (Kafka reads one request per connection at a time).
// Clients fetch one request at a time per connection, so this never slows
// one that reads its answers.
const maxQueuedRecordBytes = 8 << 20

// conn serves one client connection. Two goroutines: serve reads and
// processes requests one at a time, in order; writeLoop writes their
// responses in the same order. A request whose answer must wait for
// something (a produce waiting for its fsync) is processed at once and
// hands writeLoop a wait function, so later requests are read and
// processed while the fsync runs — Redpanda's two-phase handlers — yet
// responses still leave in request order.
type conn struct {
	b  *Broker
	ln *listener // the listener it came in on
	nc net.Conn  // a *tls.Conn on a TLS listener
	// principal is who the connection authenticated as ("User:name"),
	// security.Anonymous until then. Reader goroutine only.
	principal string
	// sasl is the connection's SASL state on a SASL listener
	// (sasl.go). Reader goroutine only.
	sasl saslState
	// id is unique among the broker's connections (share sessions are
	// dropped with the connection that opened them); host is the
	// client's address as Kafka describes members ("/127.0.0.1").
	id       uint64
	host     string
	lg       *zap.Logger
	clientID string
	out      chan *pending
	done     chan struct{} // closed when writeLoop exits
	// queued is the record data of the responses handed to writeLoop
	// and not yet written (maxQueuedRecordBytes); writeLoop signals
	// drained after lowering it.
	queued  atomic.Int64
	drained chan struct{}

	// release, set by the handler of the request being processed (see
	// afterWrite), moves into that request's pending. Reader goroutine
	// only.
	release func()
	// closeAfterResponse, set by a handler, closes the connection once the
	// responses before it are sent (a failed acks=0 produce). Reader
	// goroutine only.
	closeAfterResponse bool

	stopOnce sync.Once

	// quota is this connection's rate-limit state (quota_conn.go).
	// Reader goroutine only.
	quota connQuota

	// holding, set by the handler of the request being processed
	// (holdFrame), are what its frame's buffer waits for before it is
	// read into again; held are the frames waiting so, oldest first,
	// and spare the buffers free again (nextFrameBuf). Reader goroutine
	// only.
	holding []<-chan struct{}
	held    []heldFrame
	spare   [][]byte
}

// heldFrame is a request frame that a handler's work still reads after
// the handler returned: a cluster produce's records, until every raft
// group given some has proposed them (cluster.Node.ProduceAsync).
type heldFrame struct {
	buf  []byte
	rels []<-chan struct{}
}

// maxHeldFrames bounds the frames one connection has held at once: a
// request past it waits, in nextFrameBuf, for the oldest to be let go.
// With franz-go's five produce requests in flight per broker, four lets
// a connection read on while its partitions' groups take the requests
// before.
const maxHeldFrames = 4

// maxFrameBuf is the largest frame buffer a connection keeps for the
// next request (produce frames are several MiB: growing a fresh one
// each time cost a quarter of produce throughput); a larger one is
// dropped so one huge request does not pin memory for the connection's
// lifetime.
const maxFrameBuf = 16 << 20

// holdFrame keeps the frame of the request being handled from being
// read into again until every one of rels is closed. Reader goroutine
// only (a handler).
func (c *conn) holdFrame(rels ...<-chan struct{}) { c.holding = append(c.holding, rels...) }

// nextFrameBuf returns the buffer to read the request after frame into:
// frame's own, unless its handler held it (holdFrame), then a spare one
// (nil: ReadFrame allocates). Frames let go since, oldest first, are
// spares again; at maxHeldFrames held it waits for the oldest.
func (c *conn) nextFrameBuf(frame []byte) []byte {
	if len(c.holding) == 0 {
		if cap(frame) <= maxFrameBuf {
			return frame
		}
		return nil
	}
	c.held = append(c.held, heldFrame{buf: frame, rels: c.holding})
	c.holding = nil
	if len(c.held) >= maxHeldFrames {
		for _, rel := range c.held[0].rels {
			<-rel // always closed, soon: ProduceAsync's contract
		}
	}
	for len(c.held) > 0 && c.held[0].letGo() {
		if b := c.held[0].buf; cap(b) <= maxFrameBuf && len(c.spare) < maxHeldFrames {
			c.spare = append(c.spare, b[:0])
		}
		c.held[0] = heldFrame{}
		c.held = c.held[1:]
	}
	n := len(c.spare)
	if n == 0 {
		return nil
	}
	b := c.spare[n-1]
	c.spare[n-1] = nil
	c.spare = c.spare[:n-1]
	return b
}

// letGo reports whether every group given the frame's records has
// proposed them (a closed channel stays closed: asking again is cheap).
func (h *heldFrame) letGo() bool {
	for _, rel := range h.rels {
		select {
		case <-rel:
		default:
			return false
		}
	}
	return true
}

// pending is one response on its way out. wait, if set, blocks until the
// response may be sent and may fill in resp; release, if set, runs once
// the response is encoded and written (or dropped).
type pending struct {
	corrID  int32
	resp    kmsg.Response
	wait    func()
	release func()
	// began is when the request was decoded; seconds observes the time
	// until its response is written (nil: not measured).
	began   time.Time
	seconds prometheus.Observer
	// records is the record data resp carried when it was queued
	// (conn.queued).
	records int64
	// raw, if set, is a bare SASL token sent instead of a response
	// (after a SaslHandshake v0): a length and the bytes.
	raw []byte
}

// afterWrite registers fn to run once the response of the request being
// handled has been written, for buffers the response refers to. Handlers
// call it from the reader goroutine.
func (c *conn) afterWrite(fn func()) { c.release = fn }

func newConn(b *Broker, l *listener, nc net.Conn) *conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	lg := b.lg.With(zap.String("remote", nc.RemoteAddr().String()))
	if l.tls != nil {
		nc = tls.Server(nc, l.tls.Config()) // the handshake runs in serve
	}
	return &conn{
		b:         b,
		ln:        l,
		nc:        nc,
		principal: security.Anonymous,
		id:        b.connIDs.Add(1),
		host:      clientHost(nc),
		lg:        lg,
		out:       make(chan *pending, maxPipelined),
		drained:   make(chan struct{}, 1),
		done:      make(chan struct{}),
		quota:     connQuota{ip: remoteIP(nc)},
	}
}

// stopReading makes the reader return at its next read; the request being
// processed still gets its response (graceful shutdown).
func (c *conn) stopReading() {
	c.stopOnce.Do(func() { c.nc.SetReadDeadline(time.Now()) })
}

func (c *conn) serve() {
	defer c.b.removeConn(c)
	c.b.connGoroutine(c.writeLoop)
	defer func() {
		close(c.out)
		<-c.done
		c.nc.Close()
		c.b.connClosed(c)
	}()
	if !c.handshake() {
		return
	}
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var buf []byte
	for {
		// Idle connections close after IdleTimeout. Set the deadline, then
		// check for shutdown: Close cancels ctx before it sets an
		// immediate deadline (stopReading), so one of the two wins.
		c.nc.SetReadDeadline(time.Now().Add(c.b.cfg.IdleTimeout))
		if c.b.ctx.Err() != nil {
			return
		}
		read := protocol.ReadFrame
		if c.sasl.raw {
			read = protocol.ReadToken // a bare SASL token (SaslHandshake v0)
		}
		frame, err := read(r, buf, c.maxFrame())
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded) && c.b.ctx.Err() == nil:
				c.lg.Debug("closing idle connection", zap.Duration("idle", c.b.cfg.IdleTimeout))
			case errors.Is(err, io.EOF), errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, net.ErrClosed):
			case errors.Is(err, protocol.ErrFrameTooLarge), errors.Is(err, protocol.ErrMalformed):
				c.lg.Warn("closing connection: bad frame", zap.Error(err))
			default:
				c.lg.Debug("connection read ended", zap.Error(err))
			}
			return
		}
		var p *pending
		var ok bool
		if c.sasl.raw {
			p, ok = c.handleRawSASL(frame) // after a SaslHandshake v0 (sasl.go)
		} else {
			p, ok = c.handle(frame)
		}
		buf = c.nextFrameBuf(frame)
		if !ok {
			if p != nil { // a last response, then the connection closes
				select {
				case c.out <- p:
				case <-c.done:
				}
			}
			return
		}
		if p != nil {
			if p.records = responseRecordBytes(p.resp); p.records > 0 {
				c.queued.Add(p.records)
			}
			select {
			case c.out <- p:
			case <-c.done:
				return
			}
			for c.queued.Load() > maxQueuedRecordBytes {
				select {
				case <-c.drained:
				case <-c.done:
					return
				}
			}
		}
		// A throttled request mutes the connection (KIP-219, quota_conn.go).
		if !c.waitUnmuted() {
			return
		}
		if c.b.ctx.Err() != nil {
			return
		}
	}
}

// handle decodes and dispatches one request. It returns the response to
// queue (nil for acks=0 produce) and false if the connection must close.
func (c *conn) handle(frame []byte) (*pending, bool) {
	h, err := protocol.PeekHeader(frame)
	if err != nil {
		c.lg.Warn("closing connection: bad header", zap.Error(err))
		return nil, false
	}
	api := apiFor(h.Key)
	if api == nil {
		c.lg.Warn("closing connection: unsupported api key", zap.Int16("key", h.Key), zap.Int16("version", h.Version))
		return nil, false
	}
	if !c.saslAllows(h.Key) {
		c.lg.Warn("closing connection: request before authentication", zap.String("api", kmsg.NameForKey(h.Key)), zap.String("listener", c.ln.name))
		return nil, false
	}
	if h.Version < api.min || h.Version > api.max {
		if h.Key == 18 {
			// KIP-511: answer an ApiVersions we cannot serve with v0 and
			// UNSUPPORTED_VERSION, listing what we serve, so the client
			// can downgrade.
			resp := apiVersionsResponse()
			resp.SetVersion(0)
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return &pending{corrID: h.CorrelationID, resp: resp}, true
		}
		c.lg.Warn("closing connection: unsupported api version", zap.String("api", kmsg.NameForKey(h.Key)), zap.Int16("version", h.Version))
		return nil, false
	}
	h, req, err := protocol.ParseRequest(frame)
	if err != nil {
		c.lg.Warn("closing connection: request does not decode", zap.Error(err))
		return nil, false
	}
	if h.ClientID != "" {
		c.clientID = h.ClientID
	}
	rm := c.b.metrics.Request(api.key, h.Version)
	rm.Count.Inc()
	began := time.Now()
	c.quotaBeforeRequest(h.Key, began) // request quotas (quota_conn.go)
	resp, wait := c.handleSafely(api, req)
	c.quotaAfterRequest(h.Key, resp, time.Since(began), time.Now())
	release := c.release
	c.release = nil
	if resp == nil {
		if release != nil {
			release()
		}
		if c.closeAfterResponse {
			c.lg.Info("closing connection: acks=0 produce failed")
			return nil, false
		}
		rm.Seconds.Observe(time.Since(began).Seconds())
		return nil, true // acks=0 produce: no response at all
	}
	resp.SetVersion(req.GetVersion())
	// A handler may answer and then close (a failed authentication).
	return &pending{corrID: h.CorrelationID, resp: resp, wait: wait, release: release, began: began, seconds: rm.Seconds}, !c.closeAfterResponse
}

// respBufs holds encoding buffers shared by every connection. A fetch
// response is megabytes; encoding into a fresh slice grew it by doubling
// (copying and zeroing each time) and was the largest cost of serving a
// fetch. Pooled buffers keep their capacity without pinning memory to
// idle connections.
var respBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// maxPooledRespBuf bounds the buffers kept in respBufs.
const maxPooledRespBuf = 64 << 20

// handleSafely runs a handler; a panic (a bug) is logged and closes this
// connection only, instead of the whole broker.
func (c *conn) handleSafely(api *api, req kmsg.Request) (resp kmsg.Response, wait func()) {
	defer func() {
		if r := recover(); r != nil {
			c.lg.Error("handler panicked; closing the connection", zap.String("api", kmsg.NameForKey(api.key)),
				zap.Any("panic", r), zap.Stack("stack"))
			resp, wait = nil, nil
			c.closeAfterResponse = true
		}
	}()
	return api.handle(c, req)
}

func (c *conn) writeLoop() {
	defer close(c.done)
	w := bufio.NewWriterSize(c.nc, 64<<10)
	broken := false
	for p := range c.out {
		if p.wait != nil {
			// Responses already encoded go out before we block on this
			// one's fsync.
			if w.Buffered() > 0 && !broken {
				if err := w.Flush(); err != nil {
					broken = true
					c.nc.Close()
				}
			}
			p.wait()
		}
		if broken {
			if p.release != nil {
				p.release()
			}
			c.written(p)
			continue // drain so the reader never blocks
		}
		bp := respBufs.Get().(*[]byte)
		var buf []byte
		if p.resp == nil { // a raw SASL token
			buf = binary.BigEndian.AppendUint32((*bp)[:0], uint32(len(p.raw)))
			buf = append(buf, p.raw...)
		} else {
			buf = protocol.AppendResponse((*bp)[:0], p.corrID, p.resp)
		}
		if p.release != nil {
			p.release() // encoded: the response no longer needs its buffers
		}
		_, err := w.Write(buf)
		if cap(buf) <= maxPooledRespBuf {
			*bp = buf[:0]
			respBufs.Put(bp)
		}
		if p.seconds != nil {
			p.seconds.Observe(time.Since(p.began).Seconds())
		}
		c.written(p)
		if err != nil {
			broken = true
			c.nc.Close()
			continue
		}
		// Flush when nothing else is ready, batching pipelined responses.
		if len(c.out) == 0 {
			if err := w.Flush(); err != nil {
				broken = true
				c.nc.Close()
			}
		}
	}
	if !broken {
		w.Flush()
	}
}

// written lowers conn.queued by p's record data once p is written (or
// dropped) and wakes a reader waiting for that.
func (c *conn) written(p *pending) {
	if p.records == 0 {
		return
	}
	c.queued.Add(-p.records)
	select {
	case c.drained <- struct{}{}:
	default:
	}
}

// responseRecordBytes is the record data a Fetch or ShareFetch response
// holds (0 for others, and for a fetch still waiting to be filled).
func responseRecordBytes(resp kmsg.Response) int64 {
	var n int64
	switch r := resp.(type) {
	case *kmsg.FetchResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				n += int64(len(r.Topics[i].Partitions[j].RecordBatches))
			}
		}
	case *kmsg.ShareFetchResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				n += int64(len(r.Topics[i].Partitions[j].Records))
			}
		}
	}
	return n
}

// shareClient is c for the share coordinator.
func (c *conn) shareClient() share.Client {
	return share.Client{Conn: c.id, ID: c.clientID, Host: c.host}
}

// clientHost formats a peer address as Kafka reports it ("/127.0.0.1").
func clientHost(nc net.Conn) string {
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		host = nc.RemoteAddr().String()
	}
	return "/" + host
}
