package broker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareParkedFetchWokenByAck: a fetch long-polling for work is woken
// by another member's acknowledgement that makes a record acquirable, and
// gets it at once, not at the end of its MaxWait: in ordered mode the
// acceptance of a message group's head (its next record becomes the
// head), in plain mode a release. Acknowledgements that free nothing
// another member could take no longer wake waiting fetches
// (sharePart.notifyIfAcquirable); these do.
func TestShareParkedFetchWokenByAck(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{true, false} {
		t.Run(map[bool]string{true: "ordered", false: "plain"}[ordered], func(t *testing.T) {
			t.Parallel()
			b := startShareTest(t)
			createTopicRaw(t, b, "wk", 1)
			produceAll(t, newClient(t, b), &kgo.Record{Topic: "wk", Key: []byte("a"), Value: []byte("0")},
				&kgo.Record{Topic: "wk", Key: []byte("a"), Value: []byte("1")})
			kv := []string{"share.auto.offset.reset", "earliest", "share.acquire.mode", "record_limit"}
			if ordered {
				kv = append(kv, "share.message.group.source", "key", "share.message.group.ordered", "true")
			}
			setShareGroupConfigs(t, b, "wkg", kv...)
			m1, m2 := newRawShare(t, b, "wkg", "m1", "wk"), newRawShare(t, b, "wkg", "m2", "wk")
			require.Equal(t, [][3]int64{{0, 0, 1}}, acquired(onlyPartition(t, m1.fetch(0, 0, 1))))
			if !ordered {
				// Record 1 too, so that m2 has nothing to take.
				require.Equal(t, [][3]int64{{1, 1, 1}}, acquired(onlyPartition(t, m1.fetch(1, 0, 1))))
			}

			const maxWait = 8000
			start := time.Now()
			parked := m2.async(fetchRequest(m2, 0, maxWait))
			select {
			case resp := <-parked:
				t.Fatalf("nothing was acquirable, yet the fetch was answered: %v", resp)
			case <-time.After(300 * time.Millisecond):
			}
			epoch := int32(1)
			typ := int8(1) // accept: group a's next record becomes its head
			if !ordered {
				epoch, typ = 2, 2 // release record 0
			}
			require.Zero(t, ackCode(t, m1.do(ackRequest(m1, epoch, 0, 0, typ)).(*kmsg.ShareAcknowledgeResponse)))
			select {
			case resp := <-parked:
				require.NotNil(t, resp)
				want := [][3]int64{{1, 1, 1}}
				if !ordered {
					want = [][3]int64{{0, 0, 2}}
				}
				require.Equal(t, want, acquired(onlyPartition(t, resp.(*kmsg.ShareFetchResponse))))
				require.Less(t, time.Since(start), maxWait*time.Millisecond/2, "woken by the acknowledgement, not by its MaxWait")
			case <-time.After(maxWait * time.Millisecond):
				t.Fatal("the waiting fetch was not woken by the acknowledgement")
			}
		})
	}
}
