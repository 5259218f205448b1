package dedup

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/protocol"
)

// FuzzDedupFilter feeds arbitrary produce bytes to the dedup filter (which
// decodes records of client batches) and the record decoder: they must
// not panic, and a rewritten output must be whole batches with valid
// CRCs, the rewritten ones valid compacted batches.
func FuzzDedupFilter(f *testing.F) {
	r := kmsg.Record{Value: []byte("v"), Headers: []kmsg.Header{{Key: "dedup-id", Value: []byte("a")}}}
	one := records.AppendRecord(nil, &r)
	two := records.AppendRecord(append([]byte(nil), one...), &kmsg.Record{OffsetDelta: 1, Value: []byte("w"),
		Headers: []kmsg.Header{{Key: "dedup-id", Value: []byte("a")}}})
	f.Add(records.EncodeBatch(one, 1, 1, 1))
	f.Add(records.EncodeBatch(two, 2, 1, 1))
	f.Add(append(records.EncodeBatch(one, 1, 1, 1), records.EncodeBatch(two, 2, 1, 1)...))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Fix the first batch's CRC so record decoding is reached.
		data = append([]byte(nil), data...)
		protocol.SetBatchCRC(data)
		for _, s := range []Settings{{windowMs: 1, header: "dedup-id"}, {windowMs: 1, content: true, groupScope: true, groupHeader: "g"}} {
			d := &topicTable{ids: map[string]slot{}}
			out, rewritten, _, _, _, err := d.filterLocked(s, append([]byte(nil), data...), 10, nil)
			if err != nil || !rewritten {
				continue
			}
			n := 0
			_ = records.EachBatch(out, func(h *protocol.BatchHeader, batch []byte) error {
				n += int(h.Size())
				if !protocol.VerifyBatchCRC(batch) {
					t.Fatalf("rewritten batch with a bad CRC")
				}
				if h.Compression() == protocol.CompressionNone && h.RecordCount < h.LastOffsetDelta+1 {
					if err := protocol.ValidateCompactedRecords(batch); err != nil {
						t.Fatalf("rewritten batch does not validate: %v", err)
					}
				}
				return nil
			})
			if n != len(out) {
				t.Fatalf("rewritten output has %d bytes, its batches %d", len(out), n)
			}
		}
		_ = records.EachRecord(data, func(int64, int64, *kmsg.Record, []byte) bool { return true })
	})
}
