package broker

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// Crash tests run a broker in a child process (this test binary, running
// only the one test) so that they can SIGKILL it: no shutdown at all, as
// a process crash or kill -9 leaves it.

// serveCrashChild, called first in a crash test, is the child's side:
// with env set (to the data directory) it starts a broker there, hands
// it to setup (nil: nothing), publishes its address in <dir>/addr and
// blocks until it is killed. Without env it returns at once (the
// parent's side).
func serveCrashChild(t *testing.T, env string, setup func(*Broker), opts ...func(*Config)) {
	dir := os.Getenv(env)
	if dir == "" {
		return
	}
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.DataDir, cfg.Logger = "127.0.0.1:0", dir, zap.NewNop()
	for _, o := range opts {
		o(&cfg)
	}
	b, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(b)
	}
	if err := os.WriteFile(filepath.Join(dir, "addr.tmp"), []byte(b.Addr()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "addr.tmp"), filepath.Join(dir, "addr")); err != nil {
		t.Fatal(err)
	}
	select {} // until SIGKILL
}

// crashChild is the parent's handle on a child broker.
type crashChild struct {
	addr   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the child has exited
}

// startCrashChild starts test in a child process serving from dir (env
// names it, see serveCrashChild) and waits for its address. The child is
// killed at cleanup if still running.
func startCrashChild(t *testing.T, test, env, dir string) *crashChild {
	t.Helper()
	c := &crashChild{cmd: exec.Command(os.Args[0], "-test.run=^"+test+"$"), exited: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), env+"="+dir)
	require.NoError(t, c.cmd.Start())
	go func() { c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(c.kill)
	require.Eventually(t, func() bool {
		raw, err := os.ReadFile(filepath.Join(dir, "addr"))
		c.addr = string(raw)
		return err == nil
	}, 30*time.Second, 10*time.Millisecond)
	return c
}

// kill SIGKILLs the child and waits until it has exited.
func (c *crashChild) kill() {
	c.cmd.Process.Kill()
	<-c.exited
}
