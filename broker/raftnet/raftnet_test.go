package raftnet

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type inbox struct {
	mu  sync.Mutex
	got map[string][]string // group -> messages, in arrival order
	n   int
}

func (b *inbox) handle(group string, from uint64, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.got == nil {
		b.got = map[string][]string{}
	}
	b.got[group] = append(b.got[group], fmt.Sprintf("%d:%s", from, data))
	b.n++
}

func (b *inbox) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

// cluster starts n transports that know each other.
func cluster(t *testing.T, n int) ([]*Transport, []*inbox) {
	t.Helper()
	lns := make([]net.Listener, n)
	peers := map[uint64]string{}
	for i := range lns {
		lns[i] = listen(t)
		peers[uint64(i+1)] = lns[i].Addr().String()
	}
	ts := make([]*Transport, n)
	boxes := make([]*inbox, n)
	for i := range ts {
		boxes[i] = &inbox{}
		tr, err := Start(Config{NodeID: uint64(i + 1), ClusterID: "c1", Listener: lns[i], Peers: peers, Handler: boxes[i].handle})
		require.NoError(t, err)
		ts[i] = tr
		t.Cleanup(func() { _ = tr.Close() })
	}
	return ts, boxes
}

// TestDeliveryInOrder: messages of several groups arrive intact and, per
// sender, in the order sent.
func TestDeliveryInOrder(t *testing.T) {
	ts, boxes := cluster(t, 3)
	for i := range 3000 {
		g := fmt.Sprintf("topic-%d", i%3)
		require.True(t, ts[0].Send(g, 2, fmt.Appendf(nil, "m%d", i)))
		require.True(t, ts[2].Send(g, 2, fmt.Appendf(nil, "m%d", i)))
	}
	require.Eventually(t, func() bool { return boxes[1].count() == 6000 }, 10*time.Second, 5*time.Millisecond)
	for g, msgs := range boxes[1].got {
		next := map[string]int{}
		for _, m := range msgs {
			var from, i int
			_, err := fmt.Sscanf(m, "%d:m%d", &from, &i)
			require.NoError(t, err)
			key := fmt.Sprint(from)
			require.Greater(t, i+1, next[key], "group %s from %d out of order", g, from)
			next[key] = i + 1
		}
	}
	require.Zero(t, boxes[0].count())
	require.False(t, ts[0].Send("g", 9, []byte("x")), "unknown node")
}

// TestReconnects: a peer that restarts on the same address gets the
// messages sent after it is back.
func TestReconnects(t *testing.T) {
	ts, boxes := cluster(t, 2)
	require.True(t, ts[0].Send("g", 2, []byte("before")))
	require.Eventually(t, func() bool { return boxes[1].count() == 1 }, 5*time.Second, 5*time.Millisecond)
	addr := ts[1].Addr().String()
	require.NoError(t, ts[1].Close())
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	box := &inbox{}
	again, err := Start(Config{NodeID: 2, ClusterID: "c1", Listener: ln, Peers: map[uint64]string{1: ts[0].Addr().String(), 2: addr}, Handler: box.handle})
	require.NoError(t, err)
	defer again.Close()
	require.Eventually(t, func() bool {
		ts[0].Send("g", 2, []byte("after")) // raft resends; so does this test
		return box.count() > 0
	}, 10*time.Second, 20*time.Millisecond)
}

// raw dials t and writes b, then reports whether t closed the
// connection (it never answers).
func closedAfter(t *testing.T, tr *Transport, b []byte) bool {
	t.Helper()
	c, err := net.Dial("tcp", tr.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, _ = c.Write(b)
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return err == io.EOF
}

func hello(cluster string, from, to uint64) []byte {
	b := append([]byte(magic), version)
	b = binary.BigEndian.AppendUint16(b, uint16(len(cluster)))
	b = append(b, cluster...)
	b = binary.BigEndian.AppendUint64(b, from)
	return binary.BigEndian.AppendUint64(b, to)
}

// TestRefusesBadInput: a wrong hello or a malformed frame closes the
// connection, and nothing reaches the handler.
func TestRefusesBadInput(t *testing.T) {
	ts, boxes := cluster(t, 2)
	frame := func(n uint32, g uint16, rest []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, n)
		b = binary.BigEndian.AppendUint16(b, g)
		return append(b, rest...)
	}
	for name, b := range map[string][]byte{
		"garbage":        []byte("GET / HTTP/1.1\r\n\r\n"),
		"other cluster":  hello("c2", 1, 2),
		"other node":     hello("c1", 1, 3),
		"unknown sender": hello("c1", 7, 2),
		"itself":         hello("c1", 2, 2),
		"huge frame":     append(hello("c1", 1, 2), frame(MaxFrame+1, 1, []byte("g"))...),
		"short frame":    append(hello("c1", 1, 2), frame(1, 0, nil)...),
		"group too long": append(hello("c1", 1, 2), frame(5, 9, []byte("abc"))...),
	} {
		require.True(t, closedAfter(t, ts[1], b), name)
	}
	require.Zero(t, boxes[1].count())
	// A good hello and frame are delivered.
	c, err := net.Dial("tcp", ts[1].Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(append(hello("c1", 1, 2), frame(2+1+2, 1, []byte("gok"))...))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return boxes[1].count() == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"1:ok"}, boxes[1].got["g"])
}

// TestQueueBound: with the peer unreachable, Send drops beyond the
// queue's bound instead of blocking or growing.
func TestQueueBound(t *testing.T) {
	ln := listen(t)
	dead := listen(t)
	deadAddr := dead.Addr().String()
	require.NoError(t, dead.Close())
	tr, err := Start(Config{NodeID: 1, ClusterID: "c1", Listener: ln, Peers: map[uint64]string{2: deadAddr},
		Handler: func(string, uint64, []byte) {}, QueueBytes: 10_000})
	require.NoError(t, err)
	defer tr.Close()
	sent := 0
	for range 1000 {
		if tr.Send("g", 2, make([]byte, 100)) {
			sent++
		}
	}
	require.Less(t, sent, 100)
	require.Greater(t, sent, 50)
}

// TestCloseStopsGoroutines: Close returns after every goroutine of the
// transport ended (no stack in this package's code but the test's).
func TestCloseStopsGoroutines(t *testing.T) {
	ts, _ := cluster(t, 3)
	for _, tr := range ts {
		tr.Send("g", 1, []byte("x"))
		tr.Send("g", 2, []byte("x"))
		tr.Send("g", 3, []byte("x"))
	}
	time.Sleep(50 * time.Millisecond)
	for _, tr := range ts {
		require.NoError(t, tr.Close())
	}
	// Close waits for every goroutine's wg.Done, its last act; one may
	// still be on its way out of the function for a moment after.
	buf := make([]byte, 1<<20)
	var left string
	for deadline := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		left = ""
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "broker/raftnet.(*") {
				left = g
			}
		}
		if left == "" || time.Now().After(deadline) {
			break
		}
	}
	require.Empty(t, left, "a goroutine of the transport outlived Close")
}
