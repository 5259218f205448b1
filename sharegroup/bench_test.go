package sharegroup

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

const benchInFlight = 120_000

// BenchmarkInFlightMemory measures the live heap a Partition needs for
// 120,000 in-flight records (runtime.MemStats.HeapAlloc after a GC, before
// and after building the state) and reports it as B/record.
func BenchmarkInFlightMemory(b *testing.B) {
	members := []string{"member-0-aaaaaaaaaaaaaaaaa==", "member-1-bbbbbbbbbbbbbbbbb==", "member-2-ccccccccccccccccc==", "member-3-ddddddddddddddddd==",
		"member-4-eeeeeeeeeeeeeeeee==", "member-5-fffffffffffffffff==", "member-6-ggggggggggggggggg==", "member-7-hhhhhhhhhhhhhhhhh=="}
	acquireAll := func(p *Partition, fetch int, mode AcquireMode) {
		now := t0
		for off, i := int64(0), 0; off < benchInFlight; i++ {
			last := min(off+int64(fetch)-1, benchInFlight-1)
			p.Acquire(now, members[i%len(members)], []LogBatch{{First: off, Last: last}}, fetch, mode)
			off = last + 1
			now = now.Add(time.Microsecond) // distinct deadlines
		}
	}
	// ackEveryOther acknowledges every other record individually, one
	// request per record, by its owner; with release the other half is
	// released instead (alternating available / acknowledged).
	ackEveryOther := func(p *Partition, fetch int, t AckType) {
		for off := int64(1); off < benchInFlight; off += 2 {
			owner := members[(off/int64(fetch))%int64(len(members))]
			if _, err := p.Acknowledge(t0, owner, []AckBatch{{First: off, Last: off, Types: []AckType{t}}}); err != nil {
				panic(err)
			}
		}
	}
	cases := []struct {
		name  string
		build func() *Partition
	}{
		{"batch-acquired", func() *Partition {
			p := newBenchPartition()
			acquireAll(p, 500, BatchOptimized)
			return p
		}},
		{"alternating-acked-acquired", func() *Partition {
			p := newBenchPartition()
			acquireAll(p, 500, BatchOptimized)
			ackEveryOther(p, 500, AckAccept)
			return p
		}},
		{"alternating-released-acquired", func() *Partition {
			p := newBenchPartition()
			acquireAll(p, 500, BatchOptimized)
			ackEveryOther(p, 500, AckRelease)
			return p
		}},
		{"alternating-acked-available-after-restart", func() *Partition {
			p := newBenchPartition()
			acquireAll(p, 500, BatchOptimized)
			ackEveryOther(p, 500, AckAccept)
			q, err := Recover(p.cfg, []Record{p.Snapshot()})
			if err != nil {
				panic(err)
			}
			return q
		}},
		{"pathological-one-record-per-fetch", func() *Partition {
			p := newBenchPartition()
			acquireAll(p, 1, RecordLimit)
			return p
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var total float64
			var runs int
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				p := c.build()
				runtime.GC()
				runtime.ReadMemStats(&after)
				if p.InFlight() != benchInFlight {
					b.Fatalf("in flight %d", p.InFlight())
				}
				total += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / benchInFlight
				runs = len(p.runs)
				runtime.KeepAlive(p)
			}
			b.ReportMetric(total/float64(b.N), "B/record")
			b.ReportMetric(float64(runs), "runs")
		})
	}
}

func newBenchPartition() *Partition {
	cfg := DefaultConfig()
	p, _, err := New(cfg, 0, 0)
	if err != nil {
		panic(err)
	}
	return p
}

// BenchmarkAcquireAccept is the hot path of a share consumer: acquire 500
// records, accept them.
func BenchmarkAcquireAccept(b *testing.B) {
	for _, consumers := range []int{1, 8} {
		b.Run(fmt.Sprintf("consumers=%d", consumers), func(b *testing.B) {
			p := newBenchPartition()
			names := make([]string, consumers)
			for i := range names {
				names[i] = fmt.Sprint("m", i)
			}
			off := int64(0)
			i := 0
			for b.Loop() {
				m := names[i%consumers]
				i++
				got, _ := p.Acquire(t0, m, []LogBatch{{First: off, Last: off + 499}}, 500, BatchOptimized)
				off += 500
				for _, a := range got {
					if _, err := p.Acknowledge(t0, m, []AckBatch{{First: a.First, Last: a.Last, Types: []AckType{AckAccept}}}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)*500/b.Elapsed().Seconds(), "records/s")
		})
	}
}
