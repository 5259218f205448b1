package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeTopicPartitions: the topics' partitions as Metadata
// reports them, in name order, paged by ResponsePartitionLimit and the
// cursor; unknown named topics and a cursor outside the named topics
// are errors as Kafka answers them.
func TestDescribeTopicPartitions(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)
	for name, n := range map[string]int32{"dtp-a": 3, "dtp-b": 5, "dtp-c": 1} {
		_, err := adm.CreateTopic(ctx, n, 1, nil, name)
		require.NoError(t, err)
	}
	describe := func(limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, names ...string) *kmsg.DescribeTopicPartitionsResponse {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit, req.Cursor = limit, cursor
		for _, n := range names {
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = n
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp
	}
	type part struct {
		topic string
		index int32
	}
	flat := func(resp *kmsg.DescribeTopicPartitionsResponse) []part {
		var out []part
		for _, rt := range resp.Topics {
			require.Zero(t, rt.ErrorCode, *rt.Topic)
			require.NotEqual(t, [16]byte{}, rt.TopicID)
			for _, rp := range rt.Partitions {
				require.Zero(t, rp.ErrorCode)
				require.Equal(t, b.cfg.NodeID, rp.LeaderID)
				require.Equal(t, []int32{b.cfg.NodeID}, rp.Replicas)
				require.Equal(t, []int32{b.cfg.NodeID}, rp.ISR)
				out = append(out, part{*rt.Topic, rp.Partition})
			}
		}
		return out
	}

	// Everything, one page: names sorted, partitions in order.
	resp := describe(100, nil, "dtp-c", "dtp-a", "dtp-b")
	require.Nil(t, resp.NextCursor)
	var want []part
	for _, tp := range []struct {
		name string
		n    int32
	}{{"dtp-a", 3}, {"dtp-b", 5}, {"dtp-c", 1}} {
		for i := range tp.n {
			want = append(want, part{tp.name, i})
		}
	}
	require.Equal(t, want, flat(resp))

	// Pages of 2 partitions: the cursor walks through, mid-topic and at
	// topic boundaries, and the pages add up to the whole.
	var got []part
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		resp := describe(2, cursor, "dtp-a", "dtp-b", "dtp-c")
		page := flat(resp)
		require.LessOrEqual(t, len(page), 2)
		got = append(got, page...)
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	require.Equal(t, want, got)

	// No topic named: every topic, from the cursor on.
	all := flat(describe(100, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "dtp-b", Partition: 3}))
	var fromB []part
	for _, p := range all {
		if p.topic >= "dtp-" {
			fromB = append(fromB, p)
		}
	}
	require.Equal(t, want[6:], fromB) // dtp-b 3 on

	// Errors: an unknown topic; a cursor naming a topic not asked for.
	resp = describe(100, nil, "dtp-nope")
	require.Len(t, resp.Topics, 1)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[0].ErrorCode)
	resp = describe(100, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "dtp-c"}, "dtp-a")
	require.Len(t, resp.Topics, 1)
	require.Equal(t, kerr.InvalidRequest.Code, resp.Topics[0].ErrorCode)
}
