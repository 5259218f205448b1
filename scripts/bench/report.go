package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// report is everything one invocation measured; it is also the JSON output.
type report struct {
	Machine machineInfo                   `json:"machine"`
	Config  benchConfig                   `json:"config"`
	Targets []string                      `json:"targets"`
	Runs    []*targetRun                  `json:"runs"`
	Medians map[string]map[string]float64 `json:"medians,omitempty"` // target -> metric key -> median

	// plots are the PNGs written for this report, relative to the
	// markdown file (see output); the markdown embeds them.
	plots []plotFile
}

type machineInfo struct {
	Date       string `json:"date"`
	NumCPU     int    `json:"nproc"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	OSArch     string `json:"os_arch"`
	Kernel     string `json:"kernel,omitempty"`
	CPUModel   string `json:"cpu_model,omitempty"`
	MemTotal   string `json:"mem_total,omitempty"`
	DataDirFS  string `json:"data_dir_fs,omitempty"`
	GitCommit  string `json:"git_commit,omitempty"`
}

type benchConfig struct {
	Records           int64  `json:"records"`
	ValueSize         int    `json:"value_size"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
	Producers         int    `json:"producers"`
	Acks              string `json:"acks"`
	Idempotent        bool   `json:"idempotent"`
	Linger            string `json:"linger"`
	MaxBuffered       int    `json:"max_buffered_records"`
	BatchMaxBytes     int32  `json:"batch_max_bytes"`
	Compression       string `json:"compression"`
	FetchMaxBytes     int32  `json:"fetch_max_bytes"`
	FetchMaxPartBytes int32  `json:"fetch_max_partition_bytes"`
	E2ERate           int    `json:"e2e_rate"`
	E2EDuration       string `json:"e2e_duration"`
	GroupMembers      int    `json:"group_members,omitempty"`
	GroupBalancer     string `json:"group_balancer,omitempty"`
	GroupCommit       string `json:"group_commit,omitempty"`
	ShareMembers      int    `json:"share_members,omitempty"`
	ShareMaxRecords   int32  `json:"share_max_records,omitempty"` // 0: kgo's default
	TxnRecords        int    `json:"txn_records,omitempty"`
	Rounds            int    `json:"rounds"`
	Phases            string `json:"phases"`
	ShoalFsync        string `json:"shoal_fsync"`
	KfakeFsync        string `json:"kfake_fsync"`
	Seeds             string `json:"seeds,omitempty"`
	Defaults          bool   `json:"issue_defaults"` // the settings issues #2, #3 and #4 state their targets for
}

func configOf(o *options) benchConfig {
	var phases []string
	for _, p := range allPhases {
		if o.phases[p] {
			phases = append(phases, p)
		}
	}
	c := benchConfig{
		Records: o.records, ValueSize: o.valueSize, Partitions: o.partitions,
		ReplicationFactor: o.replicationFactor, Producers: o.producers,
		Acks: "all", Idempotent: true, Linger: o.linger.String(),
		MaxBuffered: o.maxBuffered, BatchMaxBytes: o.batchMaxBytes, Compression: o.compression,
		FetchMaxBytes: o.fetchMaxBytes, FetchMaxPartBytes: o.fetchMaxPartBytes,
		E2ERate: o.e2eRate, E2EDuration: o.e2eDuration.String(),
		GroupMembers: o.groupMembers, GroupBalancer: o.groupBalancer, GroupCommit: groupCommitText(o.groupCommit),
		ShareMembers: o.shareMembers, ShareMaxRecords: o.shareMaxRecords, TxnRecords: o.txnRecords,
		Rounds: o.rounds,
		Phases: strings.Join(phases, ","), ShoalFsync: o.shoalFsync,
		KfakeFsync: "SyncWrites (fsync segment+index per batch)",
		Seeds:      strings.Join(o.seeds, ","),
	}
	c.Defaults = o.records >= 1_000_000 && o.valueSize == 1024 && o.partitions == 6 &&
		o.producers == 4 && o.e2eRate == 5000 && o.e2eDuration >= 10*time.Second &&
		o.shoalFsync == "always" && len(phases) == len(allPhases) &&
		o.groupMembers == 4 && o.groupCommit == groupCommitPoll && o.shareMembers == 4 && o.shareMaxRecords == 0
	return c
}

func groupCommitText(mode string) string {
	if mode == groupCommitAuto {
		return "kgo autocommit (every 5 s) plus one CommitUncommittedOffsets per member when drained"
	}
	return "CommitUncommittedOffsets after every poll (DisableAutoCommit, BlockRebalanceOnPoll)"
}

func collectMachine(o *options) machineInfo {
	m := machineInfo{
		Date:       time.Now().UTC().Format("2006-01-02 15:04 MST"),
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version(),
		OSArch:     runtime.GOOS + "/" + runtime.GOARCH,
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				var kb int64
				if _, err := fmt.Sscan(strings.TrimSpace(v), &kb); err == nil {
					m.MemTotal = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
				}
			}
		}
	}
	dir := o.dir
	if dir == "" {
		dir = os.TempDir()
	}
	if magic, ok := fsMagic(dir); ok {
		m.DataDirFS = dir + " on " + fsName(magic)
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.GitCommit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			m.GitCommit += " (with uncommitted changes)"
		}
	}
	return m
}

func fsName(magic int64) string {
	switch magic {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs (fsync is a no-op: numbers are not durable-write numbers)"
	case 0x794c7630:
		return "overlayfs"
	case 0x2FC12FC1:
		return "zfs"
	}
	return fmt.Sprintf("fs magic %#x", magic)
}

// metric is one row of the comparison tables.
type metric struct {
	key, name    string
	higherBetter bool
	get          func(*targetRun) (float64, bool)
	format       func(float64) string
	goal         float64 // absolute goal for Shoal from the issue; 0 for none
	issue        int     // the issue stating the goals; 0 for none
	ratio        float64 // goal for shoal vs kfake (advantage); 0 for none
}

func throughput(ph func(*targetRun) *phaseResult, mb bool) func(*targetRun) (float64, bool) {
	return func(r *targetRun) (float64, bool) {
		p := ph(r)
		if p == nil || p.Records == 0 || p.Seconds == 0 {
			return 0, false
		}
		if mb {
			return p.MBPerSec, true
		}
		return p.RecordsPerSec, true
	}
}

// steady is a drain phase's rate between 10% and 90% of its records.
func steady(ph func(*targetRun) *phaseResult) func(*targetRun) (float64, bool) {
	return phaseValue(ph, func(p *phaseResult) float64 { return p.SteadyRecordsPerSec })
}

// phaseValue reads one value of a phase's result; 0 means not measured.
func phaseValue(ph func(*targetRun) *phaseResult, get func(*phaseResult) float64) func(*targetRun) (float64, bool) {
	return func(r *targetRun) (float64, bool) {
		p := ph(r)
		if p == nil || get(p) == 0 {
			return 0, false
		}
		return get(p), true
	}
}

func latency(ph func(*targetRun) *phaseResult, q func(*latencySummary) float64) func(*targetRun) (float64, bool) {
	return func(r *targetRun) (float64, bool) {
		p := ph(r)
		if p == nil || p.Latency == nil {
			return 0, false
		}
		return q(p.Latency), true
	}
}

func produceOf(r *targetRun) *phaseResult { return r.Produce }
func consumeOf(r *targetRun) *phaseResult { return r.Consume }
func e2eOf(r *targetRun) *phaseResult     { return r.E2E }
func groupOf(r *targetRun) *phaseResult   { return r.Group }

// startup is a phase's time from creating its clients to the first record.
func startup(ph func(*targetRun) *phaseResult) func(*targetRun) (float64, bool) {
	return phaseValue(ph, func(p *phaseResult) float64 { return p.StartupSeconds })
}

func fmtSec(v float64) string           { return fmt.Sprintf("%.2f", v) }
func shareOf(r *targetRun) *phaseResult { return r.Share }
func txnOf(r *targetRun) *phaseResult   { return r.Txn }

// txnRatio is the transactional produce rate as a fraction of the plain
// produce rate in the same run (issue #7: at least 50%).
func txnRatio(r *targetRun) (float64, bool) {
	t, tok := throughput(txnOf, false)(r)
	p, pok := throughput(produceOf, false)(r)
	if !tok || !pok || p == 0 {
		return 0, false
	}
	return t / p, true
}

func fmtPct(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }

func fmtRate(v float64) string { return commas(int64(math.Round(v))) }
func fmtMB(v float64) string   { return fmt.Sprintf("%.1f", v) }
func fmtMs(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func metrics(c benchConfig) []metric {
	rate := commas(int64(c.E2ERate))
	group := "Group of 4"
	if c.GroupMembers > 0 && c.GroupMembers != 4 {
		group = fmt.Sprintf("Group of %d", c.GroupMembers)
	}
	share := "4 share consumers"
	if c.ShareMembers > 0 && c.ShareMembers != 4 {
		share = fmt.Sprintf("%d share consumers", c.ShareMembers)
	}
	txn := "Transactional produce (1,000-record txns)"
	if c.TxnRecords > 0 && c.TxnRecords != 1000 {
		txn = fmt.Sprintf("Transactional produce (%s-record txns)", commas(int64(c.TxnRecords)))
	}
	p50 := func(l *latencySummary) float64 { return l.P50Ms }
	p99 := func(l *latencySummary) float64 { return l.P99Ms }
	p999 := func(l *latencySummary) float64 { return l.P999Ms }
	return []metric{
		{"produce_records_per_sec", "Produce, records/s", true, throughput(produceOf, false), fmtRate, 1_000_000, 2, issue2Ratio},
		{"produce_mb_per_sec", "Produce, MB/s", true, throughput(produceOf, true), fmtMB, 0, 2, issue2Ratio},
		{"produce_ack_p50_ms", "Produce ack latency p50, ms", false, latency(produceOf, p50), fmtMs, 0, 2, issue2Ratio},
		{"produce_ack_p99_ms", "Produce ack latency p99, ms", false, latency(produceOf, p99), fmtMs, 0, 2, issue2Ratio},
		{"consume_records_per_sec", "Consume, records/s", true, throughput(consumeOf, false), fmtRate, 1_500_000, 2, issue2Ratio},
		{"consume_mb_per_sec", "Consume, MB/s", true, throughput(consumeOf, true), fmtMB, 0, 2, issue2Ratio},
		{"e2e_p50_ms", "End-to-end p50 at " + rate + " rec/s, ms", false, latency(e2eOf, p50), fmtMs, 0, 2, issue2Ratio},
		{"e2e_p99_ms", "End-to-end p99 at " + rate + " rec/s, ms", false, latency(e2eOf, p99), fmtMs, 5, 2, issue2Ratio},
		{"e2e_p999_ms", "End-to-end p99.9 at " + rate + " rec/s, ms", false, latency(e2eOf, p999), fmtMs, 0, 2, issue2Ratio},
		{"group_records_per_sec", group + " with commits, records/s", true, throughput(groupOf, false), fmtRate, 0, 3, issue3Ratio},
		{"group_mb_per_sec", group + " with commits, MB/s", true, throughput(groupOf, true), fmtMB, 0, 3, issue3Ratio},
		{"group_steady_records_per_sec", group + " with commits, steady (10%→90%), records/s", true, steady(groupOf), fmtRate, 0, 0, 0},
		{"group_startup_sec", group + ": clients created → first record, s", false, startup(groupOf), fmtSec, 0, 0, 0},
		{"share_records_per_sec", share + " accepting, records/s", true, throughput(shareOf, false), fmtRate, 300_000, 4, issue4Ratio},
		{"share_mb_per_sec", share + " accepting, MB/s", true, throughput(shareOf, true), fmtMB, 0, 4, issue4Ratio},
		{"share_steady_records_per_sec", share + " accepting, steady (10%→90%), records/s", true, steady(shareOf), fmtRate, 0, 0, 0},
		{"share_startup_sec", share + ": clients created → first record, s", false, startup(shareOf), fmtSec, 0, 0, 0},
		{"txn_records_per_sec", txn + ", records/s", true, throughput(txnOf, false), fmtRate, 0, 0, 0},
		{"txn_vs_produce", txn + " ÷ plain produce", true, txnRatio, fmtPct, 0.5, 7, 0},
	}
}

// The issues' "at least N× kfake in the same run": #2 on each of its rows,
// #3 for the consumer group, #4 for the share consumers.
const (
	issue2Ratio = 1.2
	issue3Ratio = 1.2
	issue4Ratio = 1.5
)

// advantage is how many times better a is than b for m (>1: a is better).
func advantage(m metric, a, b float64) (float64, bool) {
	if m.higherBetter {
		if b == 0 {
			return 0, false
		}
		return a / b, true
	}
	if a == 0 {
		return 0, false
	}
	return b / a, true
}

// table renders values[target][metric] side by side.
func (rep *report) table(values func(target string, m metric) (float64, bool), withGoals bool) string {
	var b strings.Builder
	ts := rep.Targets
	pair := len(ts) >= 2
	hasShoal := ts[0] == targetShoal
	b.WriteString("| Metric |")
	for _, t := range ts {
		fmt.Fprintf(&b, " %s |", t)
	}
	if pair {
		fmt.Fprintf(&b, " %s vs %s |", ts[0], ts[1])
	}
	if withGoals && hasShoal {
		b.WriteString(" Issue goal | Met |")
	}
	b.WriteString("\n|---|")
	for range ts {
		b.WriteString("--:|")
	}
	if pair {
		b.WriteString("--:|")
	}
	if withGoals && hasShoal {
		b.WriteString("---|---|")
	}
	b.WriteString("\n")
	for _, m := range metrics(rep.Config) {
		vals := make([]float64, len(ts))
		oks := make([]bool, len(ts))
		ran := false
		for i, t := range ts {
			vals[i], oks[i] = values(t, m)
			ran = ran || oks[i]
		}
		if !ran { // a phase that did not run
			continue
		}
		fmt.Fprintf(&b, "| %s |", m.name)
		for i := range ts {
			if oks[i] {
				fmt.Fprintf(&b, " %s |", m.format(vals[i]))
			} else {
				b.WriteString(" — |")
			}
		}
		ratio, ratioOK := 0.0, false
		if pair && oks[0] && oks[1] {
			ratio, ratioOK = advantage(m, vals[0], vals[1])
		}
		if pair {
			if ratioOK {
				fmt.Fprintf(&b, " %.2f× |", ratio)
			} else {
				b.WriteString(" — |")
			}
		}
		if withGoals && hasShoal && m.issue == 0 {
			b.WriteString(" | |")
		} else if withGoals && hasShoal {
			var goal []string
			met := oks[0]
			if m.goal != 0 {
				if m.higherBetter {
					goal = append(goal, "≥ "+m.format(m.goal))
					met = met && vals[0] >= m.goal
				} else {
					goal = append(goal, "≤ "+m.format(m.goal))
					met = met && vals[0] <= m.goal
				}
			}
			if m.ratio != 0 && pair && ts[1] == targetKfake {
				goal = append(goal, fmt.Sprintf("≥ %.1f× kfake", m.ratio))
				met = met && ratioOK && ratio >= m.ratio
			}
			verdict := "no"
			if met {
				verdict = "yes"
			}
			fmt.Fprintf(&b, " #%d: %s | %s |", m.issue, strings.Join(goal, " and "), verdict)
		}
		b.WriteString("\n")
	}
	if pair {
		fmt.Fprintf(&b, "\n%s vs %s: throughput %s ÷ %s, latency %s ÷ %s; above 1 means %s is better.\n", ts[0], ts[1], ts[0], ts[1], ts[1], ts[0], ts[0])
	}
	return b.String()
}

func (rep *report) run(target string, round int) *targetRun {
	for _, r := range rep.Runs {
		if r.Target == target && r.Round == round {
			return r
		}
	}
	return nil
}

func mib(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f", float64(n)/(1<<20))
}

// byteSize prints n in the largest binary unit that divides it.
func byteSize(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

func signedMiB(n int64) string { return fmt.Sprintf("%+.0f", float64(n)/(1<<20)) }

// roundMarkdown is the tables of one round.
func (rep *report) roundMarkdown(round int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Round %d of %d\n\n", round, rep.Config.Rounds)
	b.WriteString(rep.table(func(t string, m metric) (float64, bool) {
		if r := rep.run(t, round); r != nil {
			return m.get(r)
		}
		return 0, false
	}, rep.Config.Rounds == 1))
	b.WriteString("\nProcess memory (MiB, process-wide: in-process brokers and the clients share the process; an external broker is not included). Before/after: VmRSS and Go HeapInuse after a GC and FreeOSMemory; peak: VmHWM during the phase:\n\n")
	b.WriteString("| Target | Phase | RSS before | RSS peak | RSS after | ΔRSS | HeapInuse before | HeapInuse after | ΔHeapInuse |\n|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, t := range rep.Targets {
		r := rep.run(t, round)
		if r == nil {
			continue
		}
		row := func(phase string, md *memDelta) {
			if md == nil {
				return
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t, phase,
				mib(md.Before.RSSBytes), mib(md.PeakRSSBytes), mib(md.After.RSSBytes), signedMiB(md.After.RSSBytes-md.Before.RSSBytes),
				mib(md.Before.HeapInuseBytes), mib(md.After.HeapInuseBytes), signedMiB(md.After.HeapInuseBytes-md.Before.HeapInuseBytes))
		}
		for _, ph := range r.phaseList() {
			row(ph.name, ph.p.Mem)
		}
		row("whole run (start → closed)", r.Mem)
	}
	b.WriteString(rep.duplicates(func(r *targetRun) bool { return r.Round == round }))
	b.WriteString(rep.problems(func(r *targetRun) bool { return r.Round == round }))
	return b.String()
}

// phasedResult is a phase that ran, with its name.
type phasedResult struct {
	name string
	p    *phaseResult
}

// phaseList is the phases of r that ran, in run order.
func (r *targetRun) phaseList() []phasedResult {
	var out []phasedResult
	for _, name := range allPhases {
		if p := r.phase(name); p != nil {
			out = append(out, phasedResult{name, p})
		}
	}
	return out
}

// duplicates notes records that group or share consumers received more
// than once (allowed: both are at-least-once; counted, not timed apart).
func (rep *report) duplicates(keep func(*targetRun) bool) string {
	var notes []string
	for _, r := range rep.Runs {
		if !keep(r) {
			continue
		}
		for _, ph := range r.phaseList() {
			if ph.p.Duplicates > 0 {
				notes = append(notes, fmt.Sprintf("%s round %d %s: %s", r.Target, r.Round, ph.name, commas(ph.p.Duplicates)))
			}
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "\nRecords delivered more than once (at-least-once redeliveries, not counted in the rates): " + strings.Join(notes, "; ") + ".\n"
}

// problems lists target errors and phase errors.
func (rep *report) problems(keep func(*targetRun) bool) string {
	var b strings.Builder
	for _, r := range rep.Runs {
		if !keep(r) {
			continue
		}
		if r.Error != "" {
			fmt.Fprintf(&b, "- %s round %d: %s\n", r.Target, r.Round, r.Error)
		}
		for _, ph := range r.phaseList() {
			if ph.p.Errors > 0 {
				fmt.Fprintf(&b, "- %s round %d %s: %d errors: %s\n", r.Target, r.Round, ph.name, ph.p.Errors, strings.Join(ph.p.ErrorSamples, "; "))
			}
		}
	}
	if b.Len() == 0 {
		return "\nErrors: none.\n"
	}
	return "\nErrors:\n\n" + b.String()
}

func (rep *report) computeMedians() {
	rep.Medians = map[string]map[string]float64{}
	for _, t := range rep.Targets {
		rep.Medians[t] = map[string]float64{}
		for _, m := range metrics(rep.Config) {
			var xs []float64
			for _, r := range rep.Runs {
				if r.Target != t {
					continue
				}
				if v, ok := m.get(r); ok {
					xs = append(xs, v)
				}
			}
			if len(xs) > 0 {
				rep.Medians[t][m.key] = median(xs)
			}
		}
		for _, ph := range allPhases {
			var rss, heap, peak []float64
			for _, r := range rep.Runs {
				if p := r.phase(ph); r.Target == t && p != nil && p.Mem != nil {
					rss = append(rss, float64(p.Mem.After.RSSBytes-p.Mem.Before.RSSBytes))
					heap = append(heap, float64(p.Mem.After.HeapInuseBytes-p.Mem.Before.HeapInuseBytes))
					peak = append(peak, float64(p.Mem.PeakRSSBytes))
				}
			}
			if len(rss) > 0 {
				rep.Medians[t][ph+"_rss_delta_bytes"] = median(rss)
				rep.Medians[t][ph+"_heap_inuse_delta_bytes"] = median(heap)
				rep.Medians[t][ph+"_peak_rss_bytes"] = median(peak)
			}
		}
	}
}

func (r *targetRun) phase(name string) *phaseResult {
	switch name {
	case phaseProduce:
		return r.Produce
	case phaseConsume:
		return r.Consume
	case phaseE2E:
		return r.E2E
	case phaseGroup:
		return r.Group
	case phaseShare:
		return r.Share
	case phaseTxn:
		return r.Txn
	}
	return nil
}

// summaryMarkdown is the median table over all rounds.
func (rep *report) summaryMarkdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Median of %d rounds\n\n", rep.Config.Rounds)
	b.WriteString(rep.table(func(t string, m metric) (float64, bool) {
		v, ok := rep.Medians[t][m.key]
		return v, ok
	}, true))
	b.WriteString("\nMedian process memory per phase (MiB, process-wide; see the per-round tables):\n\n| Target | Phase | RSS peak | ΔRSS | ΔHeapInuse |\n|---|---|--:|--:|--:|\n")
	for _, t := range rep.Targets {
		for _, ph := range allPhases {
			if v, ok := rep.Medians[t][ph+"_rss_delta_bytes"]; ok {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", t, ph, mib(int64(rep.Medians[t][ph+"_peak_rss_bytes"])), signedMiB(int64(v)), signedMiB(int64(rep.Medians[t][ph+"_heap_inuse_delta_bytes"])))
			}
		}
	}
	b.WriteString(rep.duplicates(func(*targetRun) bool { return true }))
	b.WriteString(rep.problems(func(*targetRun) bool { return true }))
	return b.String()
}

func readReport(path string) (*report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rep := new(report)
	if err := json.Unmarshal(b, rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rep.Targets) == 0 {
		return nil, fmt.Errorf("%s: no targets", path)
	}
	rep.computeMedians()
	return rep, nil
}

func (rep *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

const (
	markBegin = "<!-- bench:begin: generated by `go run ./scripts/bench --out`; everything up to bench:end is replaced on the next run -->"
	markEnd   = "<!-- bench:end -->"
)

// generatedMarkdown is the part of BENCHMARKS.md the tool owns.
func (rep *report) generatedMarkdown() string {
	var b strings.Builder
	m, c := rep.Machine, rep.Config
	fmt.Fprintf(&b, "## Results (%s)\n\n", m.Date)
	if !c.Defaults || c.Rounds < 3 {
		b.WriteString("> **Not a full run**: these settings differ from the issues' benchmark (1,000,000 records of 1 KiB, 6 partitions, 4 producers, 5,000 rec/s end-to-end for 10 s, a group of 4, 4 share consumers, all phases, Shoal fsync always, 3 rounds); treat the numbers as a smoke test.\n\n")
	}
	b.WriteString("| Machine | |\n|---|---|\n")
	fmt.Fprintf(&b, "| CPUs (nproc / GOMAXPROCS) | %d / %d |\n", m.NumCPU, m.GOMAXPROCS)
	if m.CPUModel != "" {
		fmt.Fprintf(&b, "| CPU | %s |\n", m.CPUModel)
	}
	if m.MemTotal != "" {
		fmt.Fprintf(&b, "| Memory | %s |\n", m.MemTotal)
	}
	fmt.Fprintf(&b, "| Go | %s %s |\n", m.GoVersion, m.OSArch)
	if m.Kernel != "" {
		fmt.Fprintf(&b, "| Kernel | %s |\n", m.Kernel)
	}
	if m.DataDirFS != "" {
		fmt.Fprintf(&b, "| Data dirs | %s |\n", m.DataDirFS)
	}
	if m.GitCommit != "" {
		fmt.Fprintf(&b, "| Commit | %s |\n", m.GitCommit)
	}
	fmt.Fprintf(&b, "| Date | %s |\n", m.Date)
	fmt.Fprintf(&b, "\nLoad: %s records of %s values (no key), %d partitions (replication factor %d), %d producer goroutines on one kgo client, acks=all, idempotent, linger %s, MaxBufferedRecords %s, batch max %s, compression %s; consumer FetchMaxBytes %s (%s per partition); end-to-end %s rec/s for %s. Shoal fsync: %s; kfake: %s. Rounds: %d, order alternating.",
		commas(c.Records), byteSize(int64(c.ValueSize)), c.Partitions, c.ReplicationFactor, c.Producers, c.Linger, commas(int64(c.MaxBuffered)), byteSize(int64(c.BatchMaxBytes)), c.Compression,
		byteSize(int64(c.FetchMaxBytes)), byteSize(int64(c.FetchMaxPartBytes)), commas(int64(c.E2ERate)), c.E2EDuration, c.ShoalFsync, c.KfakeFsync, c.Rounds)
	if c.GroupMembers > 0 && strings.Contains(c.Phases, phaseGroup) {
		fmt.Fprintf(&b, " Group: %d members (one kgo client each, classic protocol, %s balancer) drain the produce phase's topic with a fresh group id; commits: %s.",
			c.GroupMembers, c.GroupBalancer, c.GroupCommit)
	}
	if c.ShareMembers > 0 && strings.Contains(c.Phases, phaseShare) {
		maxRecords := "kgo's default ShareMaxRecords (500)"
		if c.ShareMaxRecords > 0 {
			maxRecords = "ShareMaxRecords " + commas(int64(c.ShareMaxRecords))
		}
		fmt.Fprintf(&b, " Share: %d kgo.ShareGroup consumers (one client each, %s) drain the same topic with a fresh share group (share.auto.offset.reset=earliest), accepting every record.",
			c.ShareMembers, maxRecords)
	}
	if c.TxnRecords > 0 && strings.Contains(c.Phases, phaseTxn) {
		fmt.Fprintf(&b, " Transactional produce: the produce phase's load in transactions of %s records (one transactional kgo client per producer goroutine, each its own transactional id; Flush and EndTransaction(TryCommit) after each) into a topic of its own.",
			commas(int64(c.TxnRecords)))
	}
	if c.Seeds != "" {
		fmt.Fprintf(&b, " External broker: %s.", c.Seeds)
	}
	b.WriteString("\n\n")
	if c.Rounds > 1 {
		b.WriteString(rep.summaryMarkdown())
		b.WriteString("\n")
	}
	if len(rep.plots) > 0 {
		b.WriteString("### Plots\n\n")
		for _, p := range rep.plots {
			fmt.Fprintf(&b, "%s\n\n![%s](%s)\n\n", p.Caption, strings.TrimSuffix(filepath.Base(p.Name), ".png"), p.Name)
		}
	}
	for round := 1; round <= c.Rounds; round++ {
		b.WriteString(rep.roundMarkdown(round))
		b.WriteString("\n")
	}
	return b.String()
}

// writeMarkdownFile replaces the generated section of path, creating the
// file with its explanatory header when it does not exist or has no markers.
func (rep *report) writeMarkdownFile(path string) error {
	gen := markBegin + "\n\n" + rep.generatedMarkdown() + markEnd + "\n"
	old, err := os.ReadFile(path)
	var out string
	switch {
	case err == nil && bytes.Contains(old, []byte(markBegin)) && bytes.Contains(old, []byte(markEnd)):
		s := string(old)
		i := strings.Index(s, markBegin)
		j := strings.Index(s, markEnd) + len(markEnd)
		rest := strings.TrimPrefix(s[j:], "\n")
		out = s[:i] + gen + rest
	case err == nil:
		out = strings.TrimRight(string(old), "\n") + "\n\n" + gen
	case os.IsNotExist(err):
		out = docHeader + "\n" + gen
	default:
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
