package broker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHeldFrameNotReused: a frame a handler held (a cluster produce's
// records, until its raft groups proposed them) is not read into again
// until let go; the connection reads on into spare buffers meanwhile,
// reuses a frame once it is let go, and at maxHeldFrames waits for the
// oldest.
func TestHeldFrameNotReused(t *testing.T) {
	c := &conn{}
	plain := make([]byte, 10, 64)
	require.Equal(t, &plain[:1][0], &c.nextFrameBuf(plain)[:1][0], "an unheld frame is read into again")

	rels := make([]chan struct{}, maxHeldFrames)
	frames := make([][]byte, maxHeldFrames)
	for i := range maxHeldFrames - 1 {
		rels[i] = make(chan struct{})
		frames[i] = make([]byte, 8, 32)
		c.holdFrame(rels[i])
		next := c.nextFrameBuf(frames[i])
		require.Nil(t, next, "frame %d held, no spare yet", i)
	}
	close(rels[0])
	frames[3] = make([]byte, 8, 32)
	rels[3] = make(chan struct{})
	c.holdFrame(rels[3])
	next := c.nextFrameBuf(frames[3])
	require.NotNil(t, next)
	require.Equal(t, &frames[0][:1][0], &next[:1][0], "the frame let go is the spare")
	require.Len(t, c.held, maxHeldFrames-1)

	// At maxHeldFrames held, the next waits for the oldest.
	extra := make(chan struct{})
	c.holdFrame(extra)
	got := make(chan []byte)
	go func() { got <- c.nextFrameBuf(next) }()
	select {
	case <-got:
		t.Fatal("did not wait for the oldest held frame")
	case <-time.After(50 * time.Millisecond):
	}
	close(rels[1])
	require.Equal(t, &frames[1][:1][0], &(<-got)[:1][0])
}
