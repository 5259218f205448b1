package sharegroup

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A tiny datadriven-style runner. Each file in testdata/ is a sequence of
//
//	command arg key=value ...
//	----
//	expected output (no blank lines)
//	<blank line>
//
// Lines starting with # before a command are comments. go test -rewrite
// regenerates the expected output; review the diff before committing it.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata golden output")

// t0 is the script clock's origin: now=35s means t0+35s.
var t0 = time.Unix(1_700_000_000, 0)

type scriptCase struct {
	comments []string
	cmd      string
	want     string
}

func parseScript(t *testing.T, text string) []scriptCase {
	var cases []scriptCase
	var cur scriptCase
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
		case strings.HasPrefix(l, "#"):
			cur.comments = append(cur.comments, l)
		default:
			cur.cmd = l
			i++
			require.Less(t, i, len(lines), "command %q without ----", l)
			require.Equal(t, "----", lines[i], "line %d", i+1)
			var out []string
			for i++; i < len(lines) && lines[i] != ""; i++ {
				out = append(out, lines[i])
			}
			cur.want = strings.Join(out, "\n")
			cases = append(cases, cur)
			cur = scriptCase{}
		}
	}
	return cases
}

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			t.Parallel()
			text, err := os.ReadFile(file)
			require.NoError(t, err)
			cases := parseScript(t, string(text))
			h := &harness{t: t}
			var buf strings.Builder
			for _, c := range cases {
				got := h.run(c.cmd)
				if *rewrite {
					for _, cm := range c.comments {
						buf.WriteString(cm + "\n")
					}
					fmt.Fprintf(&buf, "%s\n----\n%s\n\n", c.cmd, got)
					continue
				}
				require.Equal(t, c.want, got, "%s: %s", file, c.cmd)
			}
			if *rewrite {
				require.NoError(t, os.WriteFile(file, []byte(strings.TrimRight(buf.String(), "\n")+"\n"), 0o644))
			}
		})
	}
}

// harness drives one Partition and keeps every persisted record.
type harness struct {
	t         *testing.T
	p         *Partition
	now       time.Time
	persisted []Record
}

func (h *harness) run(line string) string {
	h.t.Helper()
	fields := strings.Fields(line)
	cmd, args := fields[0], fields[1:]
	kv := map[string]string{}
	var pos []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	if v, ok := kv["now"]; ok {
		h.now = t0.Add(h.dur(v))
	}
	var out []string
	effects := func(eff Effects) {
		for _, r := range eff.Records {
			out = append(out, "persist "+fmtRecord(r))
		}
		h.persisted = append(h.persisted, eff.Records...)
	}
	switch cmd {
	case "new":
		cfg := DefaultConfig()
		h.config(&cfg, kv)
		p, eff, err := New(cfg, int32(h.int(kv["epoch"], 0)), int64(h.int(kv["spso"], 0)))
		require.NoError(h.t, err)
		h.p, h.now, h.persisted = p, t0, nil
		effects(eff)
	case "set-config":
		cfg := h.p.Config()
		h.config(&cfg, kv)
		require.NoError(h.t, h.p.SetConfig(cfg))
	case "acquire":
		mode := BatchOptimized
		if kv["mode"] == "record" {
			mode = RecordLimit
		}
		acq, eff := h.p.Acquire(h.now, kv["member"], h.logBatches(kv["batches"]), h.int(kv["max"], 0), mode)
		var s []string
		for _, a := range acq {
			s = append(s, fmt.Sprintf("%d-%d(n=%d)", a.First, a.Last, a.DeliveryCount))
		}
		out = append(out, "acquired: "+strings.Join(s, " "))
		effects(eff)
	case "ack":
		eff, err := h.p.Acknowledge(h.now, kv["member"], h.ackBatches(pos))
		out = append(out, "ack: "+errName(err))
		effects(eff)
	case "expire":
		effects(h.p.ExpireLocks(h.now))
	case "release-member":
		effects(h.p.ReleaseMember(h.now, pos[0]))
	case "log-start":
		effects(h.p.AdvanceLogStart(int64(h.int(pos[0], 0))))
	case "complete-archiving":
		lo, hi := h.rng(pos[0])
		effects(h.p.CompleteArchiving(lo, hi))
	case "archiving":
		for _, r := range h.p.Archiving() {
			out = append(out, fmt.Sprintf("%d-%d n=%d", r.First, r.Last, r.DeliveryCount))
		}
	case "reset":
		effects(h.p.Reset(int32(h.int(kv["epoch"], 0)), int64(h.int(kv["spso"], 0))))
	case "restart":
		p, err := Recover(h.p.Config(), h.persisted)
		require.NoError(h.t, err)
		h.p = p
		out = append(out, fmt.Sprintf("recovered from %d records", len(h.persisted)))
	case "compact":
		// what the store does every N deltas: replace the history by a snapshot
		h.persisted = []Record{h.p.Snapshot()}
		out = append(out, "persist "+fmtRecord(h.persisted[0]))
	case "state":
	default:
		h.t.Fatalf("unknown command %q", cmd)
	}
	require.NoError(h.t, checkInternal(h.p), line)
	checkRecovery(h.t, h.p, h.persisted)
	out = append(out, h.state())
	return strings.Join(out, "\n")
}

func (h *harness) state() string {
	p := h.p
	s := fmt.Sprintf("spso=%d speo=%d complete=%d next-fetch=%d can-acquire=%t", p.SPSO(), p.SPEO(), p.DeliveryCompleteCount(), p.NextFetchOffset(), p.CanAcquire())
	if d := p.NextDeadline(); !d.IsZero() {
		s += " deadline=" + d.Sub(t0).String()
	}
	for _, r := range p.Ranges() {
		s += fmt.Sprintf("\n  %d-%d %v n=%d", r.First, r.Last, r.State, r.DeliveryCount)
		if r.State == StateAcquired {
			s += fmt.Sprintf(" %s@%v", r.Member, r.Deadline.Sub(t0))
		}
	}
	return s
}

func fmtRecord(r Record) string {
	s := fmt.Sprintf("%v epoch=%d spso=%d complete=%d", r.Kind, r.StateEpoch, r.StartOffset, r.DeliveryCompleteCount)
	for _, b := range r.Batches {
		s += fmt.Sprintf(" [%d-%d %v n=%d]", b.First, b.Last, b.State, b.DeliveryCount)
	}
	return s
}

func errName(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrInvalidRecordState):
		return "INVALID_RECORD_STATE (" + err.Error() + ")"
	case errors.Is(err, ErrInvalidRequest):
		return "INVALID_REQUEST (" + err.Error() + ")"
	}
	return err.Error()
}

func (h *harness) config(cfg *Config, kv map[string]string) {
	if v, ok := kv["lock"]; ok {
		cfg.RecordLockDuration = h.dur(v)
	}
	if v, ok := kv["limit"]; ok {
		cfg.DeliveryCountLimit = h.int(v, 0)
	}
	if v, ok := kv["window"]; ok {
		cfg.MaxInFlight = h.int(v, 0)
	}
	if v, ok := kv["dlq"]; ok {
		cfg.DeadLetter = v == "on"
	}
	if v, ok := kv["renew"]; ok {
		cfg.RenewDisabled = v == "off"
	}
}

func (h *harness) dur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	require.NoError(h.t, err)
	return d
}

func (h *harness) int(s string, def int) int {
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	require.NoError(h.t, err)
	return v
}

func (h *harness) rng(s string) (int64, int64) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	return int64(h.int(a, 0)), int64(h.int(b, 0))
}

// logBatches parses "0-9,10-19,20:skip".
func (h *harness) logBatches(s string) []LogBatch {
	var out []LogBatch
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		r, flag, _ := strings.Cut(part, ":")
		lo, hi := h.rng(r)
		out = append(out, LogBatch{First: lo, Last: hi, Skip: flag == "skip"})
	}
	return out
}

// ackBatches parses "0-4:accept 5-7:accept,release,reject".
func (h *harness) ackBatches(args []string) []AckBatch {
	names := map[string]AckType{"gap": AckGap, "accept": AckAccept, "release": AckRelease, "reject": AckReject, "renew": AckRenew}
	var out []AckBatch
	for _, a := range args {
		r, types, ok := strings.Cut(a, ":")
		require.True(h.t, ok, "ack batch %q", a)
		lo, hi := h.rng(r)
		b := AckBatch{First: lo, Last: hi}
		for _, tn := range strings.Split(types, ",") {
			t, ok := names[tn]
			if !ok {
				v := h.int(tn, 0)
				t = AckType(v)
			}
			b.Types = append(b.Types, t)
		}
		out = append(out, b)
	}
	return out
}
