package broker

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitGoroutineIn waits until some goroutine's stack holds every one of
// frames (it is blocked there).
func waitGoroutineIn(t *testing.T, frames ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<22)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			all := true
			for _, f := range frames {
				if !strings.Contains(g, f) {
					all = false
					break
				}
			}
			if all {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no goroutine in %v", frames)
}

// TestOffsetCommitRacingTopicDeletionLeavesNoOffset: an OffsetCommit
// checks its topic exists before it locks its group. One that passed the
// check before a deletion and writes after the deletion dropped that
// group's offsets leaves an offset of the deleted topic behind, which a
// topic re-created under the same name inherits.
func TestOffsetCommitRacingTopicDeletionLeavesNoOffset(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	createTopicRaw(t, b, "gone", 1)
	c := dialRaw(t, b)
	require.Equal(t, []int16{0}, c.commit(b, 9, "g", "", -1, commitPart{"gone", 0, 5, -1, ""}))

	// Stall a commit between its topic check and its group lock: it asks
	// whether "g" is a share group (share.Coordinator.mu) in between.
	release := b.shares.HoldMap()
	held := true
	defer func() {
		if held {
			release()
		}
	}()
	c2 := dialRaw(t, b)
	committed := make(chan []int16, 1)
	go func() { committed <- c2.commit(b, 9, "g", "", -1, commitPart{"gone", 0, 7, -1, ""}) }()
	waitGoroutineIn(t, "groups.(*Coordinator).Commit", "share.(*Coordinator).IsShareGroup")

	// The deletion drops g's offsets, then waits for share.Coordinator.mu
	// (DeleteTopicState).
	deleted := make(chan error, 1)
	go func() { deleted <- b.topicAdmin.Delete(b.topics.Get("gone")) }()
	waitGoroutineIn(t, "share.(*Coordinator).DeleteTopicState")
	release()
	held = false
	require.NoError(t, <-deleted)
	codes := <-committed
	t.Logf("commit racing the deletion answered %v", codes)

	createTopicRaw(t, b, "gone", 1)
	require.Equal(t, int64(-1), c.fetch("g", "gone", 0)[0].Offset,
		"the re-created topic inherited an offset committed for the deleted one")
}
