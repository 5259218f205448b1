package broker

import (
	"context"
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
					bp.Load().groups.ExpireOffsets(time.Now().Add(365 * 24 * time.Hour))
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

// TestTxnOffsetCommitVsTopicDeletion: a topic deleted while a
// TxnOffsetCommit for it is in flight must not leave the transaction an
// offset the deletion did not see: committed, it would outlive the topic
// and be what the group reads for a topic created again under that name.
// As in Kafka, a TxnOffsetCommit for a topic already gone gets
// UNKNOWN_TOPIC_OR_PARTITION (the partitions are checked under the group
// lock: "before-lock"), and the deletion removes the transaction's offset
// if it is pending by then (a deletion mark here: "before-add", for a
// group that exists and for one the commit creates, a simple
// committer's). (Found by review.)
func TestTxnOffsetCommitVsTopicDeletion(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"before-add", "before-add-new-group", "before-lock"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			var adm atomic.Pointer[kadm.Client]
			var armed atomic.Bool
			var once sync.Once
			deleted := make(chan struct{}) // DeleteTopics answered
			deleteTopic := func(string) {
				if !armed.Load() {
					return
				}
				once.Do(func() {
					go func() {
						defer close(deleted)
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						defer cancel()
						_, _ = adm.Load().DeleteTopics(ctx, "td")
					}()
					waitOrTimeout(deleted)
				})
			}
			b := startTest(t, func(c *Config) {
				c.DataDir = t.TempDir()
				if how == "before-lock" {
					c.txnOffsetBeforeLock = deleteTopic
				} else {
					c.txnOffsetBeforeAdd = deleteTopic
				}
			})
			adm.Store(kadm.NewClient(newClient(t, b)))
			setBrokerConfigs(b, "transaction.abort.timed.out.transaction.cleanup.interval.ms", "3600000")
			createTopicRaw(t, b, "td", 1)
			createTopicRaw(t, b, "data", 1)
			if how != "before-add-new-group" {
				plainCommit(t, adm.Load(), "g", "data", 1)
			}
			r := &rawTxn{c: dialRaw(t, b), id: "td"}
			require.Zero(t, r.init(60000).ErrorCode)
			require.Equal(t, []string{"NONE"}, names(r.addPartitions("data", 0)))
			require.Zero(t, r.produce("data", 0, 0, "v"))
			require.Zero(t, r.addOffsets("g"))
			armed.Store(true)
			code := codeName(r.commitOffset("g", -1, "", "td", 0, 7))
			if how == "before-lock" {
				require.Equal(t, "UNKNOWN_TOPIC_OR_PARTITION", code)
			} else {
				require.Equal(t, "NONE", code, "checked before the deletion")
			}
			<-deleted
			require.Nil(t, b.topics.Get("td"))
			require.Zero(t, r.end(true))
			createTopicRaw(t, b, "td", 1)
			off, code := r.fetchOffset("g", "td", 0, true)
			require.Equal(t, "NONE", code)
			require.Equal(t, int64(-1), off, "the topic created again has no offset")
		})
	}
}

// TestTxnOffsetCommitVsDroppingMarks: once the transaction that a
// deletion mark was written for ends, the mark is dropped; a
// TxnOffsetCommit of another transaction for the partition landing
// between the end and the drop must not lose to the drop (a badger
// deletion, newer than its stamp): made after the deletion, its offset
// is committed with its transaction, as in Kafka. (Found while fixing
// the review's findings.)
func TestTxnOffsetCommitVsDroppingMarks(t *testing.T) {
	t.Parallel()
	var other atomic.Pointer[rawTxn]
	var code atomic.Int32 // o's TxnOffsetCommit's answer
	committed := make(chan struct{})
	var armed atomic.Bool
	var once sync.Once
	b := startTest(t, func(c *Config) {
		c.DataDir = t.TempDir()
		c.beforeDropMarks = func(group string) {
			if group != "g" || !armed.Load() {
				return
			}
			once.Do(func() {
				go func() {
					defer close(committed)
					code.Store(int32(other.Load().commitOffset("g", -1, "", "dm", 0, 9)))
				}()
				waitOrTimeout(committed)
			})
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	r := txnWithOffset(t, b, "dm", "dm", "v") // TxnOffsetCommit 7 for g, pending
	del, err := adm.DeleteOffsets(ctx, "g", kadm.TopicsSet{"dm": {0: {}}})
	require.NoError(t, err)
	require.NoError(t, del.Error()) // a deletion mark
	o := &rawTxn{c: dialRaw(t, b), id: "dm2"}
	require.Zero(t, o.init(60000).ErrorCode)
	require.Equal(t, []string{"NONE"}, names(o.addPartitions("dm", 0)))
	require.Zero(t, o.produce("dm", 0, 0, "w"))
	require.Zero(t, o.addOffsets("g"))
	other.Store(o)
	armed.Store(true)
	require.Zero(t, r.end(false)) // the mark is dropped, o commits 9 meanwhile
	<-committed
	armed.Store(false)
	require.Zero(t, code.Load())
	_, fetched := o.fetchOffset("g", "dm", 0, true)
	require.Equal(t, "UNSTABLE_OFFSET_COMMIT", fetched, "o's offset is pending")
	require.Zero(t, o.end(true))
	off, fetched := o.fetchOffset("g", "dm", 0, true)
	require.Equal(t, "NONE", fetched)
	require.Equal(t, int64(9), off, "made after the deletion, o's offset is committed")
}
