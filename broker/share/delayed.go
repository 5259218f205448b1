package share

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

// DelayScan makes DirectCounts count the delayed records no receive has
// reached yet (past the share-partition's end offset), reading them from
// the log: without it a delayed record counts as visible until a receive
// acquires and defers it. SQS's ApproximateNumberOfMessagesDelayed.
type DelayScan struct {
	// NotBefore is when a record may be delivered (zero: now), as
	// DirectReceive.NotBefore; the record's Key, Value and Headers are
	// valid during the call only.
	NotBefore func(DirectRecord) time.Time
	// Horizon is the longest delay: a record whose timestamp is older
	// than that is not delayed (SQS: 15 minutes), so the log's time
	// index bounds the read.
	Horizon time.Duration
}

// delayScanBudget bounds the log bytes one count reads per partition;
// what it did not reach counts as visible, and the next count goes on
// from there.
const delayScanBudget = 8 << 20

// delayState is what one share-partition's counts learnt of the log
// past its end offset (sharePart.delays).
type delayState struct {
	mu sync.Mutex
	// next is the first offset not scanned yet; pending the delayed
	// records found, by offset, with their time; from the end offset of
	// the last count.
	next, from int64
	pending    []delayedAt
}

type delayedAt struct {
	offset int64
	at     time.Time
}

// delayedAhead returns how many records at or past from (the
// share-partition's end offset) and below hw are delayed past now.
// Records the window reached since the last count are dropped, those
// that came since are read, within delayScanBudget.
func (d *delayState) delayedAhead(lp *topics.Partition, from, hw int64, ds *DelayScan, now time.Time) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.next > hw || from < d.from {
		// The log was cut back, or the end offset moved back (a reset
		// to an earlier offset, the group's state deleted): what lies
		// past it is read again, what was dropped below it included.
		d.next, d.pending = 0, nil
	}
	d.from = from
	d.pending = slices.DeleteFunc(d.pending, func(p delayedAt) bool { return p.offset < from || !p.at.After(now) })
	start := max(d.next, from)
	if start < hw && ds.Horizon > 0 {
		// Nothing older than the horizon can still be delayed.
		switch off, _, ok := lp.Log.OffsetForTimestamp(now.Add(-ds.Horizon).UnixMilli()); {
		case !ok:
			start = hw
		case off > start:
			start = off
		}
	}
	for read := 0; start < hw && read < delayScanBudget; {
		data, err := lp.Log.Read(start, hw, 1<<20, true)
		if errors.Is(err, slog.ErrOffsetOutOfRange) && start < lp.Log.LogStartOffset() {
			start = lp.Log.LogStartOffset() // retention or DeleteRecords moved the start
			continue
		}
		if err != nil || len(data) == 0 {
			break
		}
		read += len(data)
		next := start
		_ = records.EachBatch(data, func(h *protocol.BatchHeader, batch []byte) error {
			next = max(next, min(h.LastOffset()+1, hw)) // a batch's records past hw: the next count's
			if h.IsControl() {
				return nil
			}
			return records.EachRecord(batch, func(off, ts int64, r *kmsg.Record, _ []byte) bool {
				if off < start || off >= hw {
					return off < hw
				}
				if h.IsLogAppendTime() {
					ts = h.MaxTimestamp
				}
				if at := ds.NotBefore(DirectRecord{Partition: lp.Index, Offset: off, Timestamp: ts, Key: r.Key, Value: r.Value, Headers: r.Headers}); at.After(now) {
					d.pending = append(d.pending, delayedAt{off, at})
				}
				return true
			})
		})
		if next <= start {
			break
		}
		start = next
	}
	d.next = max(d.next, min(start, hw))
	return int64(len(d.pending))
}
