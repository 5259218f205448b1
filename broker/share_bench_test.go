package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// BenchmarkShareDrain measures 4 franz-go share consumers draining b.N
// 1 KiB records from 6 partitions, accepting each, against Shoal and
// against kfake with the same load (issue 4's shape; its figure is 1M
// records: go test -run X -bench ShareDrain -benchtime 1000000x
// ./broker/). Producing is not timed.
func BenchmarkShareDrain(bb *testing.B) {
	bb.Run("shoal", func(bb *testing.B) {
		cfg := DefaultConfig()
		cfg.ListenAddr = "127.0.0.1:0"
		cfg.DataDir = bb.TempDir()
		cfg.Logger = zap.NewNop()
		b, err := Start(cfg)
		require.NoError(bb, err)
		defer b.Close()
		benchShareDrain(bb, b.Addr(), func(ctx context.Context, cl *kgo.Client) {
			_, err := kadm.NewClient(cl).CreateTopic(ctx, 6, 1, nil, "bench")
			require.NoError(bb, err)
			op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			op.Name, op.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
			require.NoError(bb, b.shares.IncrementalAlterGroupConfigs("bg", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op}, false))
		})
	})
	bb.Run("kfake", func(bb *testing.B) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "bench"))
		require.NoError(bb, err)
		defer c.Close()
		benchShareDrain(bb, c.ListenAddrs()[0], func(ctx context.Context, cl *kgo.Client) {
			v := "earliest"
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "bg"
			op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			op.Name, op.Value = "share.auto.offset.reset", &v
			rr.Configs = append(rr.Configs, op)
			req.Resources = append(req.Resources, rr)
			resp, err := req.RequestWith(ctx, cl)
			require.NoError(bb, err)
			require.Equal(bb, int16(0), resp.Resources[0].ErrorCode)
		})
	})
}

func benchShareDrain(bb *testing.B, addr string, setup func(context.Context, *kgo.Client)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pcl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(bb, err)
	defer pcl.Close()
	setup(ctx, pcl)
	value := make([]byte, 1024)
	n := bb.N
	var perr atomic.Value
	for i := 0; i < n; i++ {
		pcl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
		})
	}
	require.NoError(bb, pcl.Flush(ctx))
	require.Nil(bb, perr.Load())

	bb.ResetTimer()
	var (
		got        atomic.Int64
		end        atomic.Int64
		wg         sync.WaitGroup
		pollCtx, s = context.WithCancel(ctx)
		start      = time.Now()
	)
	defer s()
	for i := 0; i < 4; i++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("bg"), kgo.ConsumeTopics("bench"), kgo.FetchMaxWait(500*time.Millisecond))
		require.NoError(bb, err)
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				fs := cl.PollRecords(pollCtx, -1)
				for _, r := range fs.Records() {
					r.Ack(kgo.AckAccept)
				}
				if got.Add(int64(len(fs.Records()))) >= int64(n) && end.CompareAndSwap(0, int64(time.Since(start))) {
					s()
				}
			}
		}()
	}
	wg.Wait()
	bb.StopTimer()
	if el := time.Duration(end.Load()); el > 0 {
		bb.ReportMetric(float64(n)/el.Seconds(), "records/s")
	}
}
