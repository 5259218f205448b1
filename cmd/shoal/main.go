// Command shoal runs a Shoal broker.
//
// Every flag can also be set with an environment variable: SHOAL_ and the
// flag name in upper case with dashes as underscores (SHOAL_DATA_DIR).
// A flag given on the command line wins over the environment.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/shoal-mq/shoal/broker"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "shoal:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := broker.DefaultConfig()
	fs := flag.NewFlagSet("shoal", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: shoal [flags]\n\nShoal is a Kafka-compatible broker. Flags (each also SHOAL_<NAME> in the environment):\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.ListenAddr, "listen", cfg.ListenAddr, "host:port the Kafka listener binds")
	fs.StringVar(&cfg.AdvertisedAddr, "advertised-addr", cfg.AdvertisedAddr, "host:port clients are told to connect to (default: the listen address)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for partition logs and metadata (created if missing)")
	nodeID := fs.Int("node-id", int(cfg.NodeID), "this broker's node id (Kafka node.id)")
	fs.BoolVar(&cfg.AutoCreateTopics, "auto-create-topics", cfg.AutoCreateTopics, "create unknown topics on first use (Kafka auto.create.topics.enable)")
	numParts := fs.Int("num-partitions", int(cfg.DefaultPartitions), "partitions of auto-created topics (Kafka num.partitions)")
	fsync := fs.String("fsync", string(cfg.Fsync), "durability: 'always' fsyncs before acknowledging acks=1/all produce (grouped across requests); 'interval' acknowledges at once and fsyncs every --flush-interval (a power loss can lose that window)")
	fs.DurationVar(&cfg.FlushInterval, "flush-interval", cfg.FlushInterval, "fsync period under --fsync=interval (Kafka log.flush.interval.ms)")
	maxReq := fs.Int("max-request-bytes", int(cfg.MaxRequestBytes), "largest request frame accepted; larger ones close the connection (Kafka socket.request.max.bytes)")
	fs.DurationVar(&cfg.RetentionCheckInterval, "retention-check-interval", cfg.RetentionCheckInterval, "how often retention runs (Kafka log.retention.check.interval.ms)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long shutdown waits for in-flight requests")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", cfg.IdleTimeout, "close connections idle this long (Kafka connections.max.idle.ms)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	logFormat := fs.String("log-format", "console", "log format: console or json")

	// Environment first, so command-line flags override it.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "SHOAL_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s=%q: %v", name, v, err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg.NodeID = int32(*nodeID)
	cfg.DefaultPartitions = int32(*numParts)
	cfg.Fsync = broker.FsyncPolicy(*fsync)
	cfg.MaxRequestBytes = int32(*maxReq)

	lg, err := newLogger(*logLevel, *logFormat)
	if err != nil {
		return err
	}
	defer lg.Sync()
	cfg.Logger = lg

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	b, err := broker.Start(cfg)
	if err != nil {
		return err
	}
	lg.Info("ready", zap.String("addr", b.Addr()), zap.Duration("startup", time.Since(start)))
	<-ctx.Done()
	stop()
	return b.Close()
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
