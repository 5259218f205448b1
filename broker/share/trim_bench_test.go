package share

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
)

// BenchmarkTrimBatch: what an ordered share group's fetches cost per log
// batch read, broker side: a 1 MiB batch of 1,000 1 KiB records is read
// into the batch cache (its records found, its CRC checked) and sent
// trimmed to the next 84 records twelve times, as consecutive fetches of
// members holding a sixth of a partition's groups each take them.
//
//	go test -run X -bench TrimBatch ./broker/share/
func BenchmarkTrimBatch(b *testing.B) {
	const n, per = 1000, 84
	var recs []byte
	value := bytes.Repeat([]byte{'v'}, 1024)
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Key: []byte("group-1"), Value: value}
		recs = records.AppendRecord(recs, &r)
	}
	raw := records.EncodeBatch(recs, n, 1000, 1000)
	h, err := protocol.ParseBatchHeader(raw)
	if err != nil {
		b.Fatal(err)
	}
	arena := make([]byte, 0, 2<<20)
	b.SetBytes(int64(len(raw)))
	for range b.N {
		pb := adoptBatch(&h, raw, len(raw), nil)
		for first := int64(0); first+per <= n; first += per {
			arena = pb.appendTrim(arena[:0], []sharegroup.Acquired{{First: first, Last: first + per - 1}})
		}
	}
}
