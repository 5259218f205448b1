package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker"
)

// TestScramCommand: `shoal scram add|list|delete` on a data directory
// with no broker, the first administrator a SASL broker then accepts
// (integration/sasl_test.go logs in with one made the same way).
func TestScramCommand(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	require.NoError(t, os.WriteFile(pwFile, []byte("s3cret\n"), 0o600))
	var out, errOut bytes.Buffer
	scram := func(args ...string) error {
		out.Reset()
		errOut.Reset()
		return runScram(args, &out, &errOut)
	}
	require.NoError(t, scram("add", "--data-dir", dir, "--mechanism", "SCRAM-SHA-256", "--user", "admin", "--password-file", pwFile))
	require.Contains(t, out.String(), "added SCRAM-SHA-256 credential for admin")
	require.NoError(t, scram("add", "--data-dir", dir, "--mechanism", "scram-sha-512", "--user", "admin", "--password", "p", "--iterations", "16384"))
	require.NoError(t, scram("list", "--data-dir", dir))
	require.Equal(t, "admin\tSCRAM-SHA-256\titerations=4096\nadmin\tSCRAM-SHA-512\titerations=16384\n", out.String())

	require.ErrorContains(t, scram("add", "--data-dir", dir, "--mechanism", "SCRAM-SHA-256", "--user", "x", "--password", "p", "--iterations", "1000"), "iterations")
	require.ErrorContains(t, scram("add", "--data-dir", dir, "--mechanism", "SCRAM-SHA-1", "--user", "x", "--password", "p"), "SCRAM-SHA-1")
	require.ErrorContains(t, scram("add", "--data-dir", dir, "--mechanism", "SCRAM-SHA-256", "--user", "x"), "--password")
	require.ErrorContains(t, scram("add", "--data-dir", dir, "--mechanism", "SCRAM-SHA-256", "--user", "x", "--password", "a", "--password-file", pwFile), "not both")
	require.ErrorContains(t, scram("rotate"), "unknown command")

	require.NoError(t, scram("delete", "--data-dir", dir, "--mechanism", "SCRAM-SHA-512", "--user", "admin"))
	require.Error(t, scram("delete", "--data-dir", dir, "--mechanism", "SCRAM-SHA-512", "--user", "admin"))
	list, err := broker.ScramList(dir)
	require.NoError(t, err)
	require.Equal(t, []broker.ScramCredential{{User: "admin", Mechanism: "SCRAM-SHA-256", Iterations: 4096}}, list)

	// Through run, as the shoal binary dispatches it.
	require.NoError(t, run([]string{"scram", "list", "--data-dir", dir}, func(string) (string, bool) { return "", false }, &errOut))
}
