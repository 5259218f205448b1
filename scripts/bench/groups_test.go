package main

import (
	"strings"
	"sync"
	"testing"
)

func TestOffsetSet(t *testing.T) {
	s := newOffsetSet(map[int32]int64{0: 10, 1: 0}, map[int32]int64{0: 200, 1: 64})
	if s.total != 190+64 {
		t.Fatalf("total %d", s.total)
	}
	for _, c := range []struct {
		p    int32
		off  int64
		want int
	}{{0, 9, -1}, {0, 200, -1}, {2, 0, -1}, {0, 10, 1}, {0, 10, 0}, {1, 63, 1}, {1, 63, 0}} {
		if got := s.mark(c.p, c.off); got != c.want {
			t.Errorf("mark(%d, %d) = %d, want %d", c.p, c.off, got, c.want)
		}
	}
	// Concurrent marking of everything, twice over: each offset counts once.
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := int64(10); off < 200; off++ {
				s.mark(0, off)
			}
			for off := int64(0); off < 64; off++ {
				s.mark(1, off)
			}
		}()
	}
	wg.Wait()
	if !s.complete() || s.seen.Load() != s.total {
		t.Fatalf("seen %d of %d", s.seen.Load(), s.total)
	}
}

func TestGoalColumn(t *testing.T) {
	rep := &report{Config: benchConfig{Rounds: 1, GroupMembers: 4, ShareMembers: 4}, Targets: []string{targetShoal, targetKfake}}
	rep.Runs = []*targetRun{
		{Target: targetShoal, Round: 1, Group: &phaseResult{Records: 1, Seconds: 1, RecordsPerSec: 130, MBPerSec: 1, StartupSeconds: 3}, Share: &phaseResult{Records: 1, Seconds: 1, RecordsPerSec: 310_000, MBPerSec: 1}},
		{Target: targetKfake, Round: 1, Group: &phaseResult{Records: 1, Seconds: 1, RecordsPerSec: 100, MBPerSec: 1, StartupSeconds: 0.1}, Share: &phaseResult{Records: 1, Seconds: 1, RecordsPerSec: 200_000, MBPerSec: 1}},
	}
	md := rep.roundMarkdown(1)
	for _, want := range []string{
		"| Group of 4 with commits, records/s | 130 | 100 | 1.30× | #3: ≥ 1.2× kfake | yes |",
		"| Group of 4 with commits, MB/s | 1.0 | 1.0 | 1.00× | #3: ≥ 1.2× kfake | no |",
		"| Group of 4: clients created → first record, s | 3.00 | 0.10 | 0.03× | | |",
		"| 4 share consumers accepting, records/s | 310,000 | 200,000 | 1.55× | #4: ≥ 300,000 and ≥ 1.5× kfake | yes |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("missing row %q in\n%s", want, md)
		}
	}
	if strings.Contains(md, "Produce, records/s") {
		t.Errorf("rows of phases that did not run are shown:\n%s", md)
	}
}
