package broker

// DescribeShareGroupOffsets (90).
//
// Behavior: for each group, the share-partition start offset (SPSO) of
// the requested partitions, or with Topics null of every share-partition
// that has state (topics deleted since are left out). A partition
// without state answers StartOffset -1 and Lag -1; an unknown topic or
// partition UNKNOWN_TOPIC_OR_PARTITION per partition. Lag (v1, KIP-1226)
// is high watermark - SPSO - records already acknowledged or archived at
// or above the SPSO. LeaderEpoch is 0 (one epoch). A group that is not a
// share group (unknown, or classic/consumer) is GROUP_ID_NOT_FOUND at the
// group level.
//
// Version notes: v0 (Kafka 4.1); v1 adds Lag.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(90, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(c *conn, req *kmsg.DescribeShareGroupOffsetsRequest) kmsg.Response {
	return c.b.shares.DescribeOffsets(req)
}
