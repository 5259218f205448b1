package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotFile is one PNG written by writePlots, with the caption the
// markdown gives it.
type plotFile struct {
	Name    string `json:"name"`
	Caption string `json:"caption"`
}

// phaseTitles names the phases in plot titles.
var phaseTitles = map[string]string{
	phaseProduce: "Produce",
	phaseConsume: "Consume",
	phaseE2E:     "End-to-end (fixed rate)",
	phaseGroup:   "Consumer group with commits",
	phaseShare:   "Share consumers accepting",
	phaseTxn:     "Transactional produce",
}

// targetColor keeps one color per target across every plot.
func (rep *report) targetColor(target string) color.Color {
	for i, t := range rep.Targets {
		if t == target {
			return plotutil.DarkColors[i%len(plotutil.DarkColors)]
		}
	}
	return color.Black
}

// writePlots draws the report's PNGs into dir: throughput over time per
// phase, latency percentiles for the produce and end-to-end phases, and a
// summary of median throughputs per target. It returns what it wrote.
func (rep *report) writePlots(dir string, progress func(string)) ([]plotFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []plotFile
	save := func(p *plot.Plot, name, caption string, w, h vg.Length) error {
		if err := p.Save(w, h, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		progress(filepath.Join(dir, name))
		out = append(out, plotFile{Name: name, Caption: caption})
		return nil
	}
	if p := rep.summaryPlot(); p != nil {
		if err := save(p, "throughput-summary.png", "Median throughput per phase (records/s; higher is better).", 8*vg.Inch, 4*vg.Inch); err != nil {
			return nil, err
		}
	}
	for _, ph := range allPhases {
		if p := rep.timelinePlot(ph); p != nil {
			if err := save(p, "timeline-"+ph+".png", phaseTitles[ph]+": records/s over time (1 s moving window), every round.", 8*vg.Inch, 3.5*vg.Inch); err != nil {
				return nil, err
			}
		}
	}
	for _, ph := range []string{phaseProduce, phaseE2E} {
		if p := rep.latencyPlot(ph); p != nil {
			what := "ack latency from Produce call to promise"
			if ph == phaseE2E {
				what = "end-to-end latency from send to consume"
			}
			if err := save(p, "latency-"+ph+".png", phaseTitles[ph]+": "+what+" by percentile (median over rounds; log scale).", 8*vg.Inch, 4*vg.Inch); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// summaryPlot is grouped bars: median records/s per throughput phase.
func (rep *report) summaryPlot() *plot.Plot {
	phases := []string{phaseProduce, phaseConsume, phaseGroup, phaseShare}
	var names []string
	var shown []string
	for _, ph := range phases {
		for _, t := range rep.Targets {
			if _, ok := rep.Medians[t][ph+"_records_per_sec"]; ok {
				shown = append(shown, ph)
				names = append(names, phaseTitles[ph])
				break
			}
		}
	}
	if len(shown) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "Shoal vs kfake: median throughput"
	p.Y.Label.Text = "records/s"
	p.Y.Min = 0
	p.Y.Tick.Marker = thousands{}
	width := vg.Points(20)
	for i, t := range rep.Targets {
		vals := make(plotter.Values, len(shown))
		for j, ph := range shown {
			vals[j] = rep.Medians[t][ph+"_records_per_sec"]
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil
		}
		bars.Color = rep.targetColor(t)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-float64(len(rep.Targets)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(t, bars)
	}
	p.Legend.Top = true
	p.NominalX(names...)
	return p
}

// timelinePlot draws records/s over the phase for every run that has a
// timeline.
func (rep *report) timelinePlot(phase string) *plot.Plot {
	p := plot.New()
	p.Title.Text = phaseTitles[phase] + ": throughput over time"
	p.X.Label.Text = "seconds since the phase started"
	p.Y.Label.Text = "records/s"
	p.Y.Min = 0
	p.Y.Tick.Marker = thousands{}
	any := false
	for _, r := range rep.Runs {
		ph := r.phase(phase)
		if ph == nil || len(ph.Timeline) < 2 {
			continue
		}
		xys := smoothRate(ph.Timeline, 4)
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		l.Color = rep.targetColor(r.Target)
		l.Width = vg.Points(1.5)
		if r.Round > 1 {
			l.Dashes = []vg.Length{vg.Points(float64(2 + r.Round)), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s r%d", r.Target, r.Round), l)
		any = true
	}
	if !any {
		return nil
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// smoothRate turns cumulative samples into a rate over a window of n
// samples (the last sample may be a shorter step: the phase's end). A
// phase shorter than two samples is drawn flat at its average rate.
func smoothRate(tl []timePoint, n int) plotter.XYs {
	if last := tl[len(tl)-1]; len(tl) <= 2 && last.Sec > 0 {
		avg := float64(last.Records-tl[0].Records) / (last.Sec - tl[0].Sec)
		return plotter.XYs{{X: tl[0].Sec, Y: avg}, {X: last.Sec, Y: avg}}
	}
	var xys plotter.XYs
	for i := 1; i < len(tl); i++ {
		j := max(0, i-n)
		dt := tl[i].Sec - tl[j].Sec
		if dt <= 0 {
			continue
		}
		xys = append(xys, plotter.XY{X: tl[i].Sec, Y: float64(tl[i].Records-tl[j].Records) / dt})
	}
	return xys
}

// latencyPlot draws latency by percentile on a "nines" axis, the median
// over rounds of each quantile, one line per target.
func (rep *report) latencyPlot(phase string) *plot.Plot {
	p := plot.New()
	p.Title.Text = phaseTitles[phase] + ": latency by percentile"
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "ms"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.X.Tick.Marker = ninesTicks{}
	any := false
	for _, t := range rep.Targets {
		byQ := map[float64][]float64{}
		for _, r := range rep.Runs {
			ph := r.phase(phase)
			if r.Target != t || ph == nil || ph.Latency == nil {
				continue
			}
			for _, qp := range ph.Latency.Quantiles {
				byQ[qp.Q] = append(byQ[qp.Q], qp.Ms)
			}
		}
		if len(byQ) == 0 {
			continue
		}
		qs := make([]float64, 0, len(byQ))
		for q := range byQ {
			qs = append(qs, q)
		}
		sort.Float64s(qs)
		var xys plotter.XYs
		for _, q := range qs {
			// Log scale: a 0 ms quantile (sub-bucket) is drawn at 1µs.
			xys = append(xys, plotter.XY{X: nines(q), Y: math.Max(median(byQ[q]), 0.001)})
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			continue
		}
		l.Color, s.Color = rep.targetColor(t), rep.targetColor(t)
		l.Width = vg.Points(1.5)
		p.Add(l, s)
		p.Legend.Add(t, l, s)
		any = true
	}
	if !any {
		return nil
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// nines maps a quantile to the x axis: p50 → 0.3, p90 → 1, p99 → 2,
// p99.9 → 3, ...; the maximum (q = 1) goes half a step past p99.99.
func nines(q float64) float64 {
	if q >= 1 {
		return 4.5
	}
	return -math.Log10(1 - q)
}

// ninesTicks labels the nines axis.
type ninesTicks struct{}

func (ninesTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range []struct {
		q     float64
		label string
	}{{0.5, "p50"}, {0.9, "p90"}, {0.99, "p99"}, {0.999, "p99.9"}, {0.9999, "p99.99"}, {1, "max"}} {
		if x := nines(t.q); x >= lo-1e-9 && x <= hi+1e-9 {
			out = append(out, plot.Tick{Value: x, Label: t.label})
		}
	}
	return out
}

// thousands labels a linear axis with k/M suffixes.
type thousands struct{}

func (thousands) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label == "" {
			continue
		}
		v := ticks[i].Value
		switch {
		case math.Abs(v) >= 1e6:
			ticks[i].Label = strings.TrimSuffix(fmt.Sprintf("%.2f", v/1e6), "0") + "M"
		case math.Abs(v) >= 1e3:
			ticks[i].Label = fmt.Sprintf("%.0fk", v/1e3)
		default:
			ticks[i].Label = fmt.Sprintf("%.0f", v)
		}
	}
	return ticks
}

// logTicks labels a log axis at 1, 2 and 5 times each power of ten.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			out = append(out, plot.Tick{Value: v, Label: strconvFloat(v)})
		}
	}
	return out
}

func strconvFloat(v float64) string {
	if v >= 1 {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}
