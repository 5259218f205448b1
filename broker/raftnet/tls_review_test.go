package raftnet

// An independent review's test (session 29): Close waited for an
// outbound TLS handshake to time out.

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Close ends an outbound TLS handshake with a peer that accepts TCP but
// never answers, rather than waiting for handshakeTimeout (10 s).
func TestReviewTLSCloseEndsStalledOutboundHandshake(t *testing.T) {
	stalled := listen(t)
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := stalled.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never read or written
		}
	}()
	t.Cleanup(func() {
		_ = stalled.Close()
		for {
			select {
			case c := <-accepted:
				_ = c.Close()
			default:
				return
			}
		}
	})
	ca := newTestCA(t)
	ln := listen(t)
	tr, err := Start(Config{NodeID: 1, ClusterID: "c1", Listener: ln,
		Peers:   map[uint64]string{1: ln.Addr().String(), 2: stalled.Addr().String()},
		Handler: func(string, uint64, []byte) {}, TLS: peerTLS(ca, ca.issue(t, "broker-1"))})
	require.NoError(t, err)
	require.True(t, tr.Send("g", 2, []byte("x")))
	var held net.Conn
	select {
	case held = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no dial")
	}
	accepted <- held
	time.Sleep(100 * time.Millisecond) // the ClientHello is out; the handshake waits
	start := time.Now()
	require.NoError(t, tr.Close())
	require.Less(t, time.Since(start), 2*time.Second, "Close blocked on a peer's TLS handshake")
}
