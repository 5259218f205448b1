package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/shoal-mq/shoal/broker"
)

const scramUsage = `Usage:
  shoal scram add    --data-dir DIR --mechanism SCRAM-SHA-256|SCRAM-SHA-512 --user NAME (--password P | --password-file F) [--iterations N]
  shoal scram list   --data-dir DIR
  shoal scram delete --data-dir DIR --mechanism M --user NAME

Manages the SCRAM credentials of a data directory while no broker runs on
it (a first administrator, as kafka-storage format --add-scram makes one).
A running broker is managed with AlterUserScramCredentials instead
(kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]',
kadm's AlterUserSCRAMs).
`

func runScram(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, scramUsage)
		return errors.New("scram: want add, list or delete")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("shoal scram "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), scramUsage) }
	dataDir := fs.String("data-dir", broker.DefaultConfig().DataDir, "the broker's data directory (log.dirs)")
	mech := fs.String("mechanism", "", "SCRAM-SHA-256 or SCRAM-SHA-512")
	user := fs.String("user", "", "the user name")
	password := fs.String("password", "", "the password (visible to other users of this machine; prefer --password-file)")
	passwordFile := fs.String("password-file", "", "a file holding the password (its first line)")
	iterations := fs.Int("iterations", 4096, "PBKDF2 iterations, 4096 to 16384")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("scram %s: unexpected argument %q", cmd, fs.Arg(0))
	}
	m := strings.ToUpper(*mech)
	switch cmd {
	case "add":
		if m == "" || *user == "" {
			return fmt.Errorf("scram add: --mechanism and --user are required")
		}
		pw := *password
		switch {
		case pw != "" && *passwordFile != "":
			return fmt.Errorf("scram add: give --password or --password-file, not both")
		case *passwordFile != "":
			raw, err := os.ReadFile(*passwordFile)
			if err != nil {
				return fmt.Errorf("scram add: %w", err)
			}
			pw, _, _ = strings.Cut(string(raw), "\n")
			pw = strings.TrimSuffix(pw, "\r")
		case pw == "":
			return fmt.Errorf("scram add: --password or --password-file is required")
		}
		if err := broker.ScramAdd(*dataDir, m, *user, pw, *iterations); err != nil {
			return fmt.Errorf("scram add: %w", err)
		}
		fmt.Fprintf(stdout, "added %s credential for %s\n", m, *user)
	case "list":
		creds, err := broker.ScramList(*dataDir)
		if err != nil {
			return fmt.Errorf("scram list: %w", err)
		}
		for _, c := range creds {
			fmt.Fprintf(stdout, "%s\t%s\titerations=%d\n", c.User, c.Mechanism, c.Iterations)
		}
	case "delete":
		if m == "" || *user == "" {
			return fmt.Errorf("scram delete: --mechanism and --user are required")
		}
		if err := broker.ScramDelete(*dataDir, m, *user); err != nil {
			return fmt.Errorf("scram delete: %w", err)
		}
		fmt.Fprintf(stdout, "deleted %s credential for %s\n", m, *user)
	default:
		fmt.Fprint(stderr, scramUsage)
		return fmt.Errorf("scram: unknown command %q (add, list, delete)", cmd)
	}
	return nil
}
