package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// crew runs a workload's members, each in its own goroutine: a member
// whose run fails is started again under the same index (and so the
// same transactional and instance ids), and with churn set a random one
// is replaced on purpose now and then, so the group rebalances.
type crew struct {
	ctx     context.Context
	run     func(ctx context.Context, idx int, stop <-chan struct{}) error
	members []*crewMember

	churn <-chan time.Time
	stopT func()
	rng   *rand.Rand

	mu       sync.Mutex
	restarts int
	churned  int
	errors   []string
}

type crewMember struct{ stop, done chan struct{} }

// newCrew starts n members running run until their stop channel closes
// (run returns nil then) or ctx ends.
func newCrew(ctx context.Context, n int, churn time.Duration, seed uint64, run func(ctx context.Context, idx int, stop <-chan struct{}) error) *crew {
	c := &crew{ctx: ctx, run: run, rng: rand.New(rand.NewPCG(seed, 7)), stopT: func() {}}
	if churn > 0 {
		tk := time.NewTicker(churn)
		c.churn, c.stopT = tk.C, tk.Stop
	}
	for i := range n {
		c.members = append(c.members, c.start(i))
	}
	return c
}

func (c *crew) start(idx int) *crewMember {
	m := &crewMember{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			err := c.run(c.ctx, idx, m.stop)
			if err == nil || c.ctx.Err() != nil {
				return
			}
			c.mu.Lock()
			c.restarts++
			if len(c.errors) < 20 {
				c.errors = append(c.errors, fmt.Sprintf("member %d: %v", idx, err))
			}
			c.mu.Unlock()
			select {
			case <-m.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return m
}

// tick replaces a random member if the churn interval passed since the
// last replacement. Only the goroutine driving the run calls it.
func (c *crew) tick() {
	select {
	case <-c.churn:
	default:
		return
	}
	i := c.rng.IntN(len(c.members))
	close(c.members[i].stop)
	<-c.members[i].done
	c.members[i] = c.start(i)
	c.mu.Lock()
	c.churned++
	c.mu.Unlock()
}

// stop stops every member, waits for them, and returns how many were
// restarted after a failure and replaced on purpose, and the first
// failures.
func (c *crew) stop() (restarts, churned int, errors []string) {
	c.stopT()
	for _, m := range c.members {
		close(m.stop)
	}
	for _, m := range c.members {
		<-m.done
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts, c.churned, c.errors
}

// Consumed is what a consuming workload saw of its records.
type Consumed struct {
	// Deliveries counts records delivered; Redelivered the records
	// delivered more than once (allowed where the guarantee is at least
	// once); Missing the records never delivered (or given up).
	Deliveries, Redelivered, Missing int
	// Violations describe the first 20 breaches of the workload's
	// guarantee; NViolations counts them all.
	Violations  []string
	NViolations int
	// Errors are the first member failures, for the log.
	Errors []string
}

// OK reports whether every record was delivered and the guarantee held.
func (c Consumed) OK() bool { return c.Missing == 0 && c.NViolations == 0 }

func (c Consumed) String() string {
	return fmt.Sprintf("%d deliveries (%d records again), %d missing, %d violations %v",
		c.Deliveries, c.Redelivered, c.Missing, c.NViolations, c.Violations)
}

func (c *Consumed) violate(format string, args ...any) {
	c.NViolations++
	if len(c.Violations) < 20 {
		c.Violations = append(c.Violations, fmt.Sprintf(format, args...))
	}
}
