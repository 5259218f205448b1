package broker

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
)

// hookWait is how long a test hook waits for work it started on another
// goroutine: with the group lock discipline that work blocks on the lock
// the hook's caller holds, so the wait runs out (and costs this much).
const hookWait = time.Second

// waitOrTimeout waits for ch to be closed or to deliver, or for hookWait.
func waitOrTimeout(ch <-chan struct{}) {
	select {
	case <-ch:
	case <-time.After(hookWait):
	}
}

// TestTxnOffsetCommitVsExpiry: offset expiry that chose an expired
// offset (its group's pending transactional offsets read) must not
// delete it once a TxnOffsetCommit for that partition has landed: the
// deletion would come after the TxnOffsetCommit and win over it at the
// commit. The hooks run expiry from inside the TxnOffsetCommit, just
// before it adds its pending offset, and hold expiry between its choice
// and its deletion until the TxnOffsetCommit is answered. As in Kafka,
// whose coordinator serialises both, the transaction's offset is
// committed. (Found by review.)
func TestTxnOffsetCommitVsExpiry(t *testing.T) {
	t.Parallel()
	var bp atomic.Pointer[Broker]
	var armed atomic.Bool
	reached := make(chan struct{}, 1) // expiry chose the offsets to delete
	answered := make(chan struct{})   // the TxnOffsetCommit was answered
	expired := make(chan struct{})    // that expiry pass is over
	var once sync.Once
	b := startTest(t, func(c *Config) {
		c.DataDir = t.TempDir()
		c.txnOffsetBeforeAdd = func(group string) {
			if group != "g" || !armed.Load() {
				return
			}
			once.Do(func() {
				go func() {
					defer close(expired)
					bp.Load().groups.expireOffsets(time.Now().Add(365 * 24 * time.Hour))
				}()
				waitOrTimeout(reached)
			})
		}
		c.expiryBeforeDelete = func(group string) {
			if group != "g" || !armed.Load() {
				return
			}
			select {
			case reached <- struct{}{}:
			default:
			}
			waitOrTimeout(answered)
		}
	})
	bp.Store(b)
	setBrokerConfigs(b, "transaction.abort.timed.out.transaction.cleanup.interval.ms", "3600000")
	createTopicRaw(t, b, "xr", 1)
	plainCommit(t, kadm.NewClient(newClient(t, b)), "g", "xr", 3) // expired by the time expiry runs
	r := &rawTxn{c: dialRaw(t, b), id: "xr"}
	require.Zero(t, r.init(60000).ErrorCode)
	require.Equal(t, []string{"NONE"}, names(r.addPartitions("xr", 0)))
	require.Zero(t, r.produce("xr", 0, 0, "v"))
	require.Zero(t, r.addOffsets("g"))
	armed.Store(true)
	require.Zero(t, r.commitOffset("g", -1, "", "xr", 0, 7))
	close(answered)
	<-expired
	armed.Store(false)
	off, _ := r.fetchOffset("g", "xr", 0, false)
	require.Equal(t, int64(3), off, "kept while a transaction holds an offset for it")
	require.Zero(t, r.end(true))
	require.Eventually(t, func() bool {
		off, code := r.fetchOffset("g", "xr", 0, true)
		return code == "NONE" && off == 7
	}, 5*time.Second, 10*time.Millisecond, "the transaction's offset is committed")
}
