package faultproxy

import (
	"net"
	"sync"
)

// LinkMode is the state of a Link.
type LinkMode int

const (
	// LinkUp forwards bytes as they come.
	LinkUp LinkMode = iota
	// LinkStalled forwards nothing and holds what it read, as a network
	// that lost its route while TCP keeps the connection: the sender's
	// writes back up, and what was held arrives, in order, once the
	// link is up again.
	LinkStalled
	// LinkCut closes every connection and refuses new ones (they are
	// accepted and closed at once), as a peer that restarted or a
	// firewall that resets.
	LinkCut
)

var linkModeNames = [...]string{"up", "stalled", "cut"}

func (m LinkMode) String() string {
	if m >= 0 && int(m) < len(linkModeNames) {
		return linkModeNames[m]
	}
	return "mode(?)"
}

// Link is a plain TCP forwarder on loopback for connections of any
// protocol (a cluster's peer links, say: one Link per direction between
// two brokers), which a test cuts, stalls and restores. Unlike Proxy
// it knows no framing: a stall holds bytes wherever they are in a
// frame, and a cut loses whatever was in flight.
type Link struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	mode   LinkMode
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewLink starts a Link on 127.0.0.1 forwarding to target.
func NewLink(target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	l.cond = sync.NewCond(&l.mu)
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Addr is the address the Link listens on.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Mode returns the Link's mode.
func (l *Link) Mode() LinkMode {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mode
}

// Set changes the Link's mode; LinkCut closes the open connections.
func (l *Link) Set(m LinkMode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mode = m
	if m == LinkCut {
		for c := range l.conns {
			_ = c.Close()
		}
	}
	l.cond.Broadcast()
}

// Close stops the Link and closes its connections.
func (l *Link) Close() error {
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		_ = c.Close()
	}
	l.cond.Broadcast()
	l.mu.Unlock()
	err := l.ln.Close()
	l.wg.Wait()
	return err
}

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		refuse := l.closed || l.mode == LinkCut
		l.mu.Unlock()
		if refuse {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", l.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l.mu.Lock()
		if l.closed || l.mode == LinkCut {
			l.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			continue
		}
		l.conns[c], l.conns[s] = struct{}{}, struct{}{}
		l.wg.Add(2)
		l.mu.Unlock()
		go l.pump(c, s)
		go l.pump(s, c)
	}
}

// pump copies src to dst, holding what it read while the link stalls.
func (l *Link) pump(src, dst net.Conn) {
	defer l.wg.Done()
	defer func() {
		_ = src.Close()
		_ = dst.Close()
		l.mu.Lock()
		delete(l.conns, src)
		delete(l.conns, dst)
		l.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.Lock()
			for l.mode == LinkStalled && !l.closed {
				l.cond.Wait()
			}
			gone := l.closed || l.mode == LinkCut
			l.mu.Unlock()
			if gone {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or closed: the other pump ends too
		}
	}
}
