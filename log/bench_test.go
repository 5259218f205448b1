package log

import (
	"bytes"
	"github.com/shoal-mq/shoal/protocol"
	"testing"
)

// BenchmarkAppend appends 16 KiB batches to a partition on the real file
// system (no fsync), as the produce path does.
func BenchmarkAppend(b *testing.B) {
	for _, name := range []string{"os", "mem"} {
		b.Run(name, func(b *testing.B) {
			fsys := OSFS()
			dir := b.TempDir()
			if name == "mem" {
				fsys, dir = NewMemFS(), "/bench"
			}
			cfg := DefaultConfig()
			cfg.SegmentBytes = 256 << 20
			p, err := Open(fsys, dir, cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			batch := testBatch(16, 1000, -1, 0, 0) // ~16 KiB
			work := bytes.Clone(batch)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := p.Append(work, testNow); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer() // the deferred Close fsyncs everything
		})
	}
}

// BenchmarkAppendIdempotent measures the producer-state bookkeeping.
func BenchmarkAppendIdempotent(b *testing.B) {
	p, err := Open(OSFS(), b.TempDir(), DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	batches := make([][]byte, 64)
	for i := range batches {
		batches[i] = testBatch(16, 1000, 1, 0, 0)
	}
	b.SetBytes(int64(len(batches[0])))
	b.ReportAllocs()
	b.ResetTimer()
	seq := int32(0)
	for i := range b.N {
		batch := batches[i%len(batches)]
		batch[53], batch[54], batch[55], batch[56] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
		reCRC(batch)
		seq += 16
		if _, err := p.Append(batch, testNow); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
}

// BenchmarkRead reads 1 MiB fetches of 16 KiB batches from a 64 MiB log.
func BenchmarkRead(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 16 << 20
	p, err := Open(OSFS(), b.TempDir(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	batch := testBatch(16, 1000, -1, 0, 0)
	for p.Size() < 64<<20 {
		res, err := p.Append(batch, testNow)
		if err != nil {
			b.Fatal(err)
		}
		p.SetHighWatermark(res.LastOffset + 1)
	}
	leo := p.LogEndOffset()
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	off := int64(0)
	for range b.N {
		out, err := p.Read(off, leo, 1<<20, true)
		if err != nil || len(out) == 0 {
			b.Fatal(err, len(out))
		}
		off += int64(len(out)/len(batch)) * 16
		if off >= leo {
			off = 0
		}
	}
	b.StopTimer()
}

func reCRC(b []byte) { protocol.SetBatchCRC(b) }

// BenchmarkOpenClean opens a cleanly closed 256 MiB partition (16 MiB
// segments, default index interval): only index files are read.
func BenchmarkOpenClean(b *testing.B) {
	dir := b.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 16 << 20
	p, err := Open(OSFS(), dir, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	batch := testBatch(4, 1000, -1, 0, 0) // ~4 KiB: one index entry per batch
	for p.Size() < 256<<20 {
		if _, err := p.Append(batch, testNow); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		p, err := Open(OSFS(), dir, cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
