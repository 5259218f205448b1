package faultproxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoBroker answers every whole request frame with a 100-byte response
// carrying its correlation id, and records the correlation ids it got
// whole and whether a connection ended inside a frame.
type echoBroker struct {
	ln net.Listener
	mu sync.Mutex
	// got are the correlation ids of whole requests; partial counts
	// connections that ended inside a frame.
	got     []int32
	partial int
}

func newEchoBroker(t *testing.T) *echoBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &echoBroker{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(c)
		}
	}()
	return b
}

func (b *echoBroker) serve(c net.Conn) {
	defer c.Close()
	for {
		f, err := readFrame(c)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || (len(f) > 0 && err != nil) {
				b.mu.Lock()
				b.partial++
				b.mu.Unlock()
			}
			return
		}
		corr := int32(binary.BigEndian.Uint32(f[8:12]))
		b.mu.Lock()
		b.got = append(b.got, corr)
		b.mu.Unlock()
		resp := make([]byte, 104)
		binary.BigEndian.PutUint32(resp, 100)
		binary.BigEndian.PutUint32(resp[4:], uint32(corr))
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

func (b *echoBroker) received() ([]int32, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int32(nil), b.got...), b.partial
}

// request is a frame of API key with correlation id corr and a body of
// 50 bytes.
func request(key int16, corr int32) []byte {
	f := make([]byte, 4+8+50)
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	binary.BigEndian.PutUint16(f[4:], uint16(key))
	binary.BigEndian.PutUint32(f[8:], uint32(corr))
	return f
}

func start(t *testing.T) (*echoBroker, *Proxy) {
	t.Helper()
	b := newEchoBroker(t)
	p, err := New(1)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	require.NoError(t, p.Start(b.ln.Addr().String()))
	return b, p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// exchange sends one request and reads its response: the response's
// correlation id, or the read error.
func exchange(c net.Conn, key int16, corr int32) (int32, error) {
	if _, err := c.Write(request(key, corr)); err != nil {
		return 0, err
	}
	f, err := readFrame(c)
	if err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(f[4:8])), nil
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 5*time.Millisecond)
}

func TestForwardsWithoutFaults(t *testing.T) {
	b, p := start(t)
	c := dial(t, p)
	for i := range int32(20) {
		corr, err := exchange(c, 0, i)
		require.NoError(t, err)
		require.Equal(t, i, corr)
	}
	got, _ := b.received()
	require.Len(t, got, 20)
	// Counted once the request is written to the broker, which may be
	// after its response has reached the client.
	eventually(t, func() bool { return p.Stats().Exchanges == 20 })
	require.Equal(t, int64(20), p.Stats().Exchanges)
}

func TestActionsLandWhereTheySay(t *testing.T) {
	for _, tc := range []struct {
		act Action
		// handled: the broker got the request whole; partialResp: the
		// client got some bytes of a response.
		handled bool
	}{
		{LoseRequest, false},
		{LoseResponse, true},
		{CutResponse, true},
	} {
		t.Run(tc.act.String(), func(t *testing.T) {
			b, p := start(t)
			c := dial(t, p)
			corr, err := exchange(c, 3, 1) // Metadata: not in Keys
			require.NoError(t, err)
			require.Equal(t, int32(1), corr)
			p.Set(Faults{Rate: 1, Keys: []int16{0}, Actions: []Action{tc.act}})
			corr, err = exchange(c, 3, 2)
			require.NoError(t, err, "other APIs pass")
			require.Equal(t, int32(2), corr)
			_, err = exchange(c, 0, 3)
			require.Error(t, err, "the produce exchange fails")
			eventually(t, func() bool {
				got, partial := b.received()
				if tc.handled {
					return len(got) == 3
				}
				return len(got) == 2 && partial <= 1
			})
			got, _ := b.received()
			require.Equal(t, tc.handled, len(got) == 3, "handled by the broker")
			require.Equal(t, int64(1), p.Stats().Faults[tc.act])
			require.Equal(t, int64(1), p.Stats().ByKey[tc.act][0])
		})
	}
}

func TestHoldResponse(t *testing.T) {
	_, p := start(t)
	c := dial(t, p)
	p.Set(Faults{Rate: 1, Actions: []Action{HoldResponse}, Hold: 300 * time.Millisecond})
	t0 := time.Now()
	corr, err := exchange(c, 0, 7)
	require.NoError(t, err)
	require.Equal(t, int32(7), corr)
	require.GreaterOrEqual(t, time.Since(t0), 300*time.Millisecond)
}

func TestCutAtAge(t *testing.T) {
	b, p := start(t)
	p.Set(Faults{CutMin: 100 * time.Millisecond, CutMax: 200 * time.Millisecond, CutActions: []Action{Close}})
	c := dial(t, p)
	t0 := time.Now()
	var err error
	for i := int32(0); err == nil; i++ {
		_, err = exchange(c, 1, i)
		time.Sleep(5 * time.Millisecond)
	}
	age := time.Since(t0)
	require.GreaterOrEqual(t, age, 100*time.Millisecond)
	require.Less(t, age, 2*time.Second)
	require.Equal(t, int64(1), p.Stats().Faults[Close])
	got, _ := b.received()
	require.NotEmpty(t, got)

	// A cut that waits for an exchange lands on the next one.
	p.Set(Faults{CutMin: 50 * time.Millisecond, CutMax: 51 * time.Millisecond, CutActions: []Action{LoseResponse}})
	c = dial(t, p)
	time.Sleep(150 * time.Millisecond)
	before, _ := b.received()
	_, err = exchange(c, 8, 99)
	require.Error(t, err)
	eventually(t, func() bool { got, _ := b.received(); return len(got) == len(before)+1 })
	require.Equal(t, int64(1), p.Stats().Faults[LoseResponse])
}

func TestFaultsEndAfterFor(t *testing.T) {
	_, p := start(t)
	p.Set(Faults{Rate: 1, Actions: []Action{LoseResponse}, For: 100 * time.Millisecond})
	time.Sleep(150 * time.Millisecond)
	c := dial(t, p)
	_, err := exchange(c, 0, 1)
	require.NoError(t, err)
}

func TestRefuse(t *testing.T) {
	_, p := start(t)
	p.Refuse(200 * time.Millisecond)
	c, err := net.Dial("tcp", p.Addr())
	if err == nil { // the reset may come before or after the dial returns
		defer c.Close()
		_, err = exchange(c, 0, 1)
	}
	require.Error(t, err, "refused")
	time.Sleep(250 * time.Millisecond)
	c = dial(t, p)
	_, err = exchange(c, 0, 2)
	require.NoError(t, err)
	require.Equal(t, int64(1), p.Stats().Refused)
}

func TestDelay(t *testing.T) {
	_, p := start(t)
	p.Set(Faults{DelayMin: 50 * time.Millisecond, DelayMax: 60 * time.Millisecond})
	c := dial(t, p)
	t0 := time.Now()
	_, err := exchange(c, 0, 1)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(t0), 100*time.Millisecond, "both ways")
}

func TestCutAll(t *testing.T) {
	_, p := start(t)
	c := dial(t, p)
	_, err := exchange(c, 0, 1)
	require.NoError(t, err)
	p.CutAll()
	_, err = exchange(c, 0, 2)
	require.Error(t, err)
}

func TestLoopbackOnly(t *testing.T) {
	p, err := New(1)
	require.NoError(t, err)
	defer p.Close()
	require.ErrorContains(t, p.Start("10.1.2.3:9092"), "loopback")
	require.Error(t, p.Start("example.com:9092"))
}

// TestSeeded: the same seed and the same sequence of exchanges on one
// connection give the same faults.
func TestSeeded(t *testing.T) {
	run := func() []bool {
		b := newEchoBroker(t)
		p, err := New(42)
		require.NoError(t, err)
		defer p.Close()
		require.NoError(t, p.Start(b.ln.Addr().String()))
		p.Set(Faults{Rate: 0.3, Actions: []Action{HoldResponse}, Hold: time.Millisecond})
		c := dial(t, p)
		var held []bool
		for i := range int32(50) {
			before := p.Stats().Faults[HoldResponse]
			_, err := exchange(c, 0, i)
			require.NoError(t, err)
			held = append(held, p.Stats().Faults[HoldResponse] > before)
		}
		return held
	}
	require.Equal(t, run(), run())
}

func TestNext(t *testing.T) {
	b, p := start(t)
	p.Next(9, LoseResponse, 0)
	p.Next(9, HoldResponse, 200*time.Millisecond)
	require.Equal(t, 2, p.Pending())
	c := dial(t, p)
	_, err := exchange(c, 1, 1)
	require.NoError(t, err, "another API passes")
	_, err = exchange(c, 9, 2)
	require.Error(t, err, "the first OffsetFetch's answer is lost")
	eventually(t, func() bool { got, _ := b.received(); return len(got) == 2 })
	c = dial(t, p)
	t0 := time.Now()
	corr, err := exchange(c, 9, 3)
	require.NoError(t, err)
	require.Equal(t, int32(3), corr)
	require.GreaterOrEqual(t, time.Since(t0), 200*time.Millisecond, "the second is held")
	require.Zero(t, p.Pending())
	_, err = exchange(c, 9, 4)
	require.NoError(t, err, "then nothing")
}
