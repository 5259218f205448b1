// Command sqsbench measures the SQS API end to end: workers that each
// loop SendMessageBatch (10 messages), ReceiveMessage (up to 10, long
// polling) and DeleteMessageBatch of what they received, against Shoal
// (cmd/shoal, fsync always) and goaws (github.com/Admiral-Piett/goaws, an
// in-memory emulator, built from scripts/sqsbench/goawsd), each a child
// process on 127.0.0.1, rounds alternating between the targets in one
// run. Both are driven over the Query protocol, the one goaws
// v0.4.5 speaks, by the same client code. It prints each round and the
// medians: messages deleted per second, and the p50/p99 of one cycle.
//
//	go run ./scripts/sqsbench --seconds 10 --rounds 3 --workers 4
package main

import (
	"bufio"
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	verbose     bool
	fsyncAlways bool
	partitions  int
)

type target struct {
	name string
	base string // http://host:port
	stop func()
	// pprof is the server's /debug/pprof/ base URL ("": not served).
	pprof string
}

// serverProfile is --server-cpuprofile: a CPU profile of Shoal's
// process over each of its rounds, to <prefix>.round<N>.
var serverProfile string

func main() {
	seconds := flag.Int("seconds", 10, "seconds per round")
	rounds := flag.Int("rounds", 3, "rounds per target (alternating)")
	workers := flag.Int("workers", 4, "concurrent send/receive/delete loops")
	body := flag.Int("body", 256, "message body bytes")
	targets := flag.String("targets", "shoal,goaws", "comma-separated: shoal, goaws")
	dir := flag.String("dir", "", "data directory for Shoal (default: a temporary one)")
	flag.BoolVar(&verbose, "v", false, "print each action's median latency per round")
	flag.BoolVar(&fsyncAlways, "fsync", true, "Shoal's sends wait for their fsync (false: fsync=interval, an experiment; acknowledgements stay durable)")
	flag.IntVar(&partitions, "partitions", 1, "partitions of a Shoal queue's topic")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the client (the servers are child processes)")
	flag.StringVar(&serverProfile, "server-cpuprofile", "", "write a CPU profile of Shoal's process over each round to `prefix`.round<N> (served by its /debug/pprof/)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sqsbench:", err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	var ts []*target
	for _, name := range strings.Split(*targets, ",") {
		t, err := start(name, *dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sqsbench:", err)
			os.Exit(1)
		}
		defer t.stop()
		ts = append(ts, t)
	}
	fmt.Printf("sqsbench: %d workers, %d s rounds, %d-byte bodies, %d CPUs, %s\n", *workers, *seconds, *body, runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339))
	rates := map[string][]float64{}
	p50s, p99s := map[string][]time.Duration{}, map[string][]time.Duration{}
	for r := 0; r < *rounds; r++ {
		for _, t := range ts {
			prof := profileServer(t, r, *seconds)
			rate, p50, p99, err := round(t, r, *workers, *body, time.Duration(*seconds)*time.Second)
			if perr := prof(); perr != nil {
				fmt.Fprintf(os.Stderr, "sqsbench: %s round %d: server profile: %v\n", t.name, r+1, perr)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "sqsbench: %s round %d: %v\n", t.name, r+1, err)
				os.Exit(1)
			}
			fmt.Printf("round %d %-6s %9.0f msgs/s   cycle p50 %7.2f ms  p99 %7.2f ms\n", r+1, t.name, rate, ms(p50), ms(p99))
			rates[t.name] = append(rates[t.name], rate)
			p50s[t.name], p99s[t.name] = append(p50s[t.name], p50), append(p99s[t.name], p99)
		}
	}
	fmt.Println("medians:")
	for _, t := range ts {
		fmt.Printf("  %-6s %9.0f msgs/s   cycle p50 %7.2f ms  p99 %7.2f ms\n", t.name, median(rates[t.name]), ms(median(p50s[t.name])), ms(median(p99s[t.name])))
	}
	if len(ts) == 2 {
		fmt.Printf("  %s/%s: %.2fx\n", ts[0].name, ts[1].name, median(rates[ts[0].name])/median(rates[ts[1].name]))
	}
}

// profileServer starts a CPU profile of t's process for a round of
// seconds (when t serves pprof) and returns a function that waits for it
// and writes it.
func profileServer(t *target, r, seconds int) func() error {
	if t.pprof == "" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("%sprofile?seconds=%d", t.pprof, max(1, seconds-1)))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(fmt.Sprintf("%s.round%d", serverProfile, r+1))
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return func() error { return <-done }
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median[T int64 | float64 | time.Duration](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func start(name, dir string) (*target, error) {
	switch name {
	case "shoal":
		// A child process, as goaws is: the client's work (XML decoding,
		// its garbage) stays out of the server's runtime.
		if dir == "" {
			d, err := os.MkdirTemp("", "sqsbench-shoal-")
			if err != nil {
				return nil, err
			}
			dir = d
		}
		bin := filepath.Join(os.TempDir(), "sqsbench-shoal")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/shoal").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building cmd/shoal (run from the repository root): %v\n%s", err, out)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		sqsAddr := l.Addr().String()
		_ = l.Close()
		fsync := "always"
		if !fsyncAlways {
			fsync = "interval" // an experiment: what waiting for the fsync costs
		}
		httpAddr, pprofURL := "", ""
		if serverProfile != "" {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			httpAddr = l.Addr().String()
			_ = l.Close()
			pprofURL = "http://" + httpAddr + "/debug/pprof/"
		}
		cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--data-dir", dir, "--fsync", fsync, "--http-addr", httpAddr,
			"--pprof="+strconv.FormatBool(serverProfile != ""),
			"--sqs-addr", sqsAddr, "--num-partitions", strconv.Itoa(partitions), "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		stop := func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait(); _ = os.RemoveAll(dir) }
		for deadline := time.Now().Add(30 * time.Second); ; {
			if c, err := net.Dial("tcp", sqsAddr); err == nil {
				_ = c.Close()
				break
			}
			if time.Now().After(deadline) {
				stop()
				return nil, fmt.Errorf("shoal's SQS API on %s never answered", sqsAddr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return &target{name: "shoal", base: "http://" + sqsAddr, stop: stop, pprof: pprofURL}, nil
	case "goaws":
		bin := filepath.Join(os.TempDir(), "sqsbench-goawsd")
		build := exec.Command("go", "build", "-o", bin, ".")
		build.Dir = filepath.Join("scripts", "sqsbench", "goawsd")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building goawsd (run from the repository root): %v\n%s", err, out)
		}
		cmd := exec.Command(bin, "--addr", "127.0.0.1:0")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("goawsd: %v", err)
		}
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		return &target{name: "goaws", base: strings.TrimSpace(line), stop: func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }}, nil
	}
	return nil, fmt.Errorf("unknown target %q", name)
}

// client speaks the Query protocol; took collects each action's
// latencies.
type client struct {
	http *http.Client
	mu   sync.Mutex
	took map[string][]time.Duration
}

type queryAnswer struct {
	QueueURL string `xml:"CreateQueueResult>QueueUrl"`
	Messages []struct {
		ReceiptHandle string
	} `xml:"ReceiveMessageResult>Message"`
	Sent []struct {
		ID string `xml:"Id"`
	} `xml:"SendMessageBatchResult>SendMessageBatchResultEntry"`
	Failed []struct{ ID, Code string }    `xml:",any>BatchResultErrorEntry"`
	Error  struct{ Code, Message string } `xml:"Error"`
}

func (c *client) call(ctx context.Context, base string, form url.Values) (*queryAnswer, error) {
	form.Set("Version", "2012-11-05")
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	start := time.Now()
	defer func() {
		c.mu.Lock()
		c.took[form.Get("Action")] = append(c.took[form.Get("Action")], time.Since(start))
		c.mu.Unlock()
	}()
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var a queryAnswer
	if err := xml.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%s: %v: %.200s", form.Get("Action"), err, raw)
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s: HTTP %d %s: %s", form.Get("Action"), resp.StatusCode, a.Error.Code, a.Error.Message)
	}
	if len(a.Failed) > 0 {
		return nil, fmt.Errorf("%s: %d entries failed (%s)", form.Get("Action"), len(a.Failed), a.Failed[0].Code)
	}
	return &a, nil
}

// round runs the workers for d on a fresh queue and returns messages
// deleted per second and the cycle latencies.
func round(t *target, r, workers, bodySize int, d time.Duration) (float64, time.Duration, time.Duration, error) {
	c := &client{http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, took: map[string][]time.Duration{}}
	if verbose {
		defer func() {
			for _, a := range []string{"SendMessageBatch", "ReceiveMessage", "DeleteMessageBatch"} {
				if l := c.took[a]; len(l) > 0 {
					fmt.Printf("    %-20s p50 %6.2f ms\n", a, ms(median(l)))
				}
			}
		}()
	}
	ctx := context.Background()
	cq, err := c.call(ctx, t.base, url.Values{"Action": {"CreateQueue"}, "QueueName": {"bench-" + strconv.Itoa(r)}})
	if err != nil {
		return 0, 0, 0, err
	}
	q := cq.QueueURL
	body := strings.Repeat("m", bodySize)
	var deleted atomic.Int64
	var mu sync.Mutex
	var cycles []time.Duration
	var firstErr atomic.Value
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			defer func() { mu.Lock(); cycles = append(cycles, mine...); mu.Unlock() }()
			for n := 0; time.Now().Before(stop); n++ {
				c0 := time.Now()
				send := url.Values{"Action": {"SendMessageBatch"}, "QueueUrl": {q}}
				for i := 1; i <= 10; i++ {
					p := "SendMessageBatchRequestEntry." + strconv.Itoa(i)
					send.Set(p+".Id", fmt.Sprint("w", w, "-", n, "-", i))
					send.Set(p+".MessageBody", body)
				}
				if _, err := c.call(ctx, t.base, send); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				recv, err := c.call(ctx, t.base, url.Values{"Action": {"ReceiveMessage"}, "QueueUrl": {q},
					"MaxNumberOfMessages": {"10"}, "WaitTimeSeconds": {"1"}, "VisibilityTimeout": {"30"}})
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				if len(recv.Messages) > 0 {
					del := url.Values{"Action": {"DeleteMessageBatch"}, "QueueUrl": {q}}
					for i, m := range recv.Messages {
						p := "DeleteMessageBatchRequestEntry." + strconv.Itoa(i+1)
						del.Set(p+".Id", strconv.Itoa(i))
						del.Set(p+".ReceiptHandle", m.ReceiptHandle)
					}
					if _, err := c.call(ctx, t.base, del); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					deleted.Add(int64(len(recv.Messages)))
				}
				mine = append(mine, time.Since(c0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, ok := firstErr.Load().(error); ok {
		return 0, 0, 0, err
	}
	if len(cycles) == 0 {
		return 0, 0, 0, fmt.Errorf("no cycle completed")
	}
	slices.Sort(cycles)
	return float64(deleted.Load()) / elapsed.Seconds(), cycles[len(cycles)/2], cycles[len(cycles)*99/100], nil
}
