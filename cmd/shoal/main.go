// Command shoal runs a Shoal broker.
//
// Settings come from four places, the first that sets one winning:
// command-line flags, SHOAL_* environment variables (SHOAL_ and the flag
// name in upper case with dashes as underscores: SHOAL_DATA_DIR), a
// Kafka-style properties file (--config FILE or SHOAL_CONFIG, with
// Kafka's broker config names where Kafka has them), and the defaults.
// broker.Settings is the table behind all of them; docs/CONFIG.md is
// generated from it. An unknown key or a bad value stops startup with a
// message naming it.
//
// `shoal scram add|list|delete` manages SCRAM credentials in a data
// directory while no broker runs on it (scram.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/shoal-mq/shoal/broker"
)

func main() {
	if err := run(os.Args[1:], os.LookupEnv, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "shoal:", err)
		os.Exit(1)
	}
}

func run(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) error {
	if len(args) > 0 && args[0] == "scram" {
		return runScram(args[1:], os.Stdout, stderr)
	}
	opts, warnings, err := parseOptions(args, lookupEnv, os.Environ(), stderr)
	if err != nil {
		return err
	}
	lg, err := newLogger(opts.LogLevel, opts.LogFormat)
	if err != nil {
		return err
	}
	defer lg.Sync()
	for _, w := range warnings {
		lg.Warn(w)
	}
	cfg := opts.Config
	cfg.Logger = lg

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	b, err := broker.Start(cfg)
	if err != nil {
		return err
	}
	lg.Info("ready", zap.String("addr", b.Addr()), zap.String("http", b.HTTPAddr()), zap.String("sqs", b.SQSAddr()), zap.Duration("startup", time.Since(start)))
	<-ctx.Done()
	stop()
	return b.Close()
}

// settingFlag is a flag bound to one broker.Setting. It only records the
// text given; parseOptions applies it after the environment and the
// file, so every source goes through the same parser.
type settingFlag struct {
	s   *broker.Setting
	def string
	val *string
}

func (f *settingFlag) String() string {
	if f == nil || f.val == nil || *f.val == "" {
		if f != nil {
			return f.def
		}
		return ""
	}
	return *f.val
}

func (f *settingFlag) Set(v string) error {
	// Check at once so the flag package reports the flag by name.
	o := broker.DefaultOptions()
	if err := f.s.Set(&o, v); err != nil {
		return err
	}
	*f.val = v
	return nil
}

func (f *settingFlag) IsBoolFlag() bool { return f.s.Kind == broker.KindBool }

// parseOptions resolves every setting: flag, else environment, else the
// properties file, else the default. It returns warnings for SHOAL_*
// variables that name no setting (they may belong to other tools, so they
// do not stop startup).
func parseOptions(args []string, lookupEnv func(string) (string, bool), env []string, out io.Writer) (broker.Options, []string, error) {
	opts := broker.DefaultOptions()
	defaults := broker.DefaultOptions()
	fs := flag.NewFlagSet("shoal", flag.ContinueOnError)
	fs.SetOutput(out)
	var configPath string
	fs.StringVar(&configPath, "config", "", "Kafka-style properties `file` of settings and static broker configs (docs/CONFIG.md)\n[env: SHOAL_CONFIG]")
	given := map[string]*string{}
	for i := range broker.Settings {
		s := &broker.Settings[i]
		v := new(string)
		given[s.Flag] = v
		kind := "`" + string(s.Kind) + "`" // the placeholder --help shows
		if s.Kind == broker.KindBool {
			kind = string(s.Kind)
		}
		fs.Var(&settingFlag{s: s, def: s.Get(&defaults), val: v}, s.Flag,
			fmt.Sprintf("%s\n[%s; config file: %s; env: %s]", s.Doc, kind, s.Key, s.EnvName()))
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: shoal [flags]\n\n"+
			"Shoal is a Kafka-compatible broker. Every flag is also an environment variable\n"+
			"(SHOAL_<FLAG>, dashes as underscores) and a key of the --config properties file;\n"+
			"a flag wins over the environment, which wins over the file. docs/CONFIG.md lists\n"+
			"every key, including the dynamic broker configs the file may set.\n\nFlags:\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return opts, nil, err
	}
	if fs.NArg() > 0 {
		return opts, nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	// The properties file.
	if !set["config"] {
		if v, ok := lookupEnv("SHOAL_CONFIG"); ok {
			configPath = v
		}
	}
	if configPath != "" {
		raw, err := os.ReadFile(configPath)
		if err != nil {
			return opts, nil, fmt.Errorf("config file: %w", err)
		}
		props, err := broker.ParseProperties(string(raw))
		if err != nil {
			return opts, nil, fmt.Errorf("config file %s: %w", configPath, err)
		}
		seen := map[string]int{}
		for _, p := range props {
			if prev, dup := seen[p.Key]; dup {
				return opts, nil, fmt.Errorf("config file %s line %d: %s is already set on line %d", configPath, p.Line, p.Key, prev)
			}
			seen[p.Key] = p.Line
			if err := broker.SetFileKey(&opts, p.Key, p.Value); err != nil {
				return opts, nil, fmt.Errorf("config file %s line %d: %w", configPath, p.Line, err)
			}
		}
	}

	// Environment over the file, flags over the environment.
	known := map[string]bool{"SHOAL_CONFIG": true}
	for i := range broker.Settings {
		s := &broker.Settings[i]
		known[s.EnvName()] = true
		switch v, inEnv := lookupEnv(s.EnvName()); {
		case set[s.Flag]:
			if err := s.Set(&opts, *given[s.Flag]); err != nil {
				return opts, nil, fmt.Errorf("--%s: %w", s.Flag, err)
			}
		case inEnv:
			if err := s.Set(&opts, v); err != nil {
				return opts, nil, fmt.Errorf("%s (%s): %w", s.EnvName(), s.Key, err)
			}
		}
	}
	var warnings []string
	var unknown []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SHOAL_") && !known[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		warnings = append(warnings, "ignoring environment variable "+name+": no such setting")
	}
	if err := opts.Config.Validate(); err != nil {
		return opts, nil, err
	}
	return opts, warnings, nil
}

func newLogger(level, format string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %v", level, err)
	}
	var zc zap.Config
	switch format {
	case "json":
		zc = zap.NewProductionConfig()
	case "console":
		zc = zap.NewDevelopmentConfig()
		zc.Development = false
		zc.DisableStacktrace = true
	default:
		return nil, fmt.Errorf("--log-format %q is not console or json", format)
	}
	zc.Level = zap.NewAtomicLevelAt(lvl)
	return zc.Build()
}
