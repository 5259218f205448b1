package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker"
)

// envMap is a fake environment.
type envMap map[string]string

func (e envMap) lookup(k string) (string, bool) { v, ok := e[k]; return v, ok }

func (e envMap) list() []string {
	var out []string
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

func writeConfig(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shoal.properties")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return p
}

func parse(t *testing.T, env envMap, args ...string) (broker.Options, []string, error) {
	t.Helper()
	var out bytes.Buffer
	return parseOptions(args, env.lookup, env.list(), &out)
}

func TestDefaults(t *testing.T) {
	o, warnings, err := parse(t, nil)
	require.NoError(t, err)
	require.Empty(t, warnings)
	require.Equal(t, broker.DefaultOptions(), o)
	require.Equal(t, "127.0.0.1:9644", o.HTTPAddr)
	require.Equal(t, "127.0.0.1:9092", o.ListenAddr)
}

// Flag over environment over file over default, for every kind of value.
func TestPrecedence(t *testing.T) {
	file := writeConfig(t,
		"# a Kafka-style file",
		"num.partitions=3",
		"listeners=PLAINTEXT://127.0.0.1:19092",
		"connections.max.idle.ms: 60000",
		"auto.create.topics.enable false",
		"log.dirs=/var/lib/shoal",
		"shoal.http.pprof.enable=true",
		"log.retention.ms=3600000",
		"group.share.max.size=50",
	)
	o, _, err := parse(t, nil, "--config", file)
	require.NoError(t, err)
	require.Equal(t, int32(3), o.DefaultPartitions)
	require.Equal(t, "127.0.0.1:19092", o.ListenAddr)
	require.Equal(t, time.Minute, o.IdleTimeout)
	require.False(t, o.AutoCreateTopics)
	require.Equal(t, "/var/lib/shoal", o.DataDir)
	require.True(t, o.Pprof)
	require.Equal(t, map[string]string{"log.retention.ms": "3600000", "group.share.max.size": "50"}, o.BrokerConfigs)

	env := envMap{"SHOAL_CONFIG": file, "SHOAL_NUM_PARTITIONS": "4", "SHOAL_IDLE_TIMEOUT": "2m", "SHOAL_AUTO_CREATE_TOPICS": "true"}
	o, _, err = parse(t, env)
	require.NoError(t, err)
	require.Equal(t, int32(4), o.DefaultPartitions, "env over file")
	require.Equal(t, 2*time.Minute, o.IdleTimeout)
	require.True(t, o.AutoCreateTopics)
	require.Equal(t, "127.0.0.1:19092", o.ListenAddr, "file where env is silent")

	o, _, err = parse(t, env, "--num-partitions", "5", "--idle-timeout=90000", "--auto-create-topics=false", "--http-addr", "")
	require.NoError(t, err)
	require.Equal(t, int32(5), o.DefaultPartitions, "flag over env")
	require.Equal(t, 90*time.Second, o.IdleTimeout)
	require.False(t, o.AutoCreateTopics)
	require.Empty(t, o.HTTPAddr, "an empty flag disables the HTTP server")

	// --config wins over SHOAL_CONFIG.
	other := writeConfig(t, "num.partitions=7")
	o, _, err = parse(t, envMap{"SHOAL_CONFIG": file}, "--config", other)
	require.NoError(t, err)
	require.Equal(t, int32(7), o.DefaultPartitions)
	require.Equal(t, "127.0.0.1:9092", o.ListenAddr)
}

// Every bad key or value stops startup with a message naming it.
func TestBadConfigRejected(t *testing.T) {
	cases := []struct {
		name  string
		env   envMap
		args  []string
		lines []string
		want  []string
	}{
		{name: "unknown key", lines: []string{"num.partitions=2", "no.such.config=1"},
			want: []string{"line 2", `unknown config "no.such.config"`}},
		{name: "bad int", lines: []string{"num.partitions=many"}, want: []string{"line 1", "num.partitions", `"many" is not an integer`}},
		{name: "int out of range", lines: []string{"num.partitions=0"}, want: []string{"num.partitions", "outside [1,"}},
		{name: "bad bool", lines: []string{"auto.create.topics.enable=yes please"}, want: []string{"auto.create.topics.enable", "not true or false"}},
		{name: "bad duration", lines: []string{"connections.max.idle.ms=soon"}, want: []string{"connections.max.idle.ms", "neither milliseconds nor a duration"}},
		{name: "negative duration", lines: []string{"log.retention.check.interval.ms=-5"}, want: []string{"log.retention.check.interval.ms", "positive"}},
		{name: "two listeners of one name", lines: []string{"listeners=PLAINTEXT://a:1,PLAINTEXT://b:2"}, want: []string{"listeners", "PLAINTEXT is given twice"}},
		{name: "ssl listener without keystore", lines: []string{"listeners=SSL://127.0.0.1:9093"}, want: []string{"listener SSL is TLS", "ssl.keystore.location"}},
		{name: "plain without tls", lines: []string{"listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=PLAIN"}, want: []string{"PLAIN sends passwords in the clear"}},
		{name: "gssapi", lines: []string{"listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=GSSAPI"}, want: []string{"GSSAPI", "not served"}},
		{name: "unmapped listener", lines: []string{"listeners=CLIENT://127.0.0.1:9093"}, want: []string{"CLIENT has no security protocol"}},
		{name: "advertised unknown listener", lines: []string{"listeners=PLAINTEXT://127.0.0.1:0", "advertised.listeners=EXTERNAL://h:1"}, want: []string{"EXTERNAL, which is not in listeners"}},
		{name: "old tls", lines: []string{"ssl.enabled.protocols=TLSv1.1,TLSv1.2"}, want: []string{"ssl.enabled.protocols", "TLSv1.1 is refused"}},
		{name: "bad client auth", lines: []string{"ssl.client.auth=sometimes"}, want: []string{"ssl.client.auth", "not one of"}},
		{name: "security prefix of no listener", lines: []string{"listener.name.external.ssl.client.auth=required"}, want: []string{"no listener is named EXTERNAL"}},
		{name: "encrypted key", lines: []string{"ssl.key.password=x"}, want: []string{"ssl.key.password", "not supported"}},
		{name: "bad mapping rule", lines: []string{"ssl.principal.mapping.rules=RULE:^CN=(.*)$"}, want: []string{"ssl.principal.mapping.rules"}},
		{name: "two log dirs", lines: []string{"log.dirs=/a,/b"}, want: []string{"log.dirs", "one data directory"}},
		{name: "bad fsync", lines: []string{"shoal.fsync.policy=sometimes"}, want: []string{"shoal.fsync.policy", "not always or interval"}},
		{name: "negative batch cache", lines: []string{"shoal.share.batch.cache.bytes=-1"}, want: []string{"shoal.share.batch.cache.bytes", "outside [0,"}},
		{name: "bad dynamic broker config", lines: []string{"log.retention.ms=forever"}, want: []string{"log.retention.ms", `"forever" is not an integer`}},
		{name: "dynamic broker config out of range", lines: []string{"group.share.max.size=0"}, want: []string{"group.share.max.size", "outside [1, 1000]"}},
		{name: "read-only broker config", lines: []string{"broker.id=3"}, want: []string{"broker.id", "another key"}},
		{name: "unsupported topic default", lines: []string{"log.cleanup.policy=shred"}, want: []string{"log.cleanup.policy", "shred"}},
		{name: "duplicate key", lines: []string{"num.partitions=2", "num.partitions=3"}, want: []string{"line 2", "already set on line 1"}},
		{name: "bad env", env: envMap{"SHOAL_NUM_PARTITIONS": "x"}, want: []string{"SHOAL_NUM_PARTITIONS", "num.partitions", `"x"`}},
		{name: "bad flag", args: []string{"--idle-timeout", "-1s"}, want: []string{"idle-timeout", "positive"}},
		{name: "bad log level", args: []string{"--log-level", "loud"}, want: []string{"log-level", `"loud"`}},
		{name: "stray argument", args: []string{"serve"}, want: []string{`unexpected argument "serve"`}},
		{name: "missing file", args: []string{"--config", "/nonexistent/shoal.properties"}, want: []string{"config file", "no such file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.lines != nil {
				args = append(args, "--config", writeConfig(t, c.lines...))
			}
			_, _, err := parse(t, c.env, args...)
			require.Error(t, err)
			for _, w := range c.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestUnknownEnvWarns(t *testing.T) {
	_, warnings, err := parse(t, envMap{"SHOAL_NUM_PARTITONS": "3", "HOME": "/root"})
	require.NoError(t, err)
	require.Equal(t, []string{"ignoring environment variable SHOAL_NUM_PARTITONS: no such setting"}, warnings)
}

// --help lists every setting with its file key and variable.
func TestHelpIsComplete(t *testing.T) {
	var out bytes.Buffer
	_, _, err := parseOptions([]string{"--help"}, envMap{}.lookup, nil, &out)
	require.True(t, errors.Is(err, flag.ErrHelp))
	for _, s := range broker.Settings {
		require.Regexp(t, `(?m)^  -`+s.Flag+`( |$)`, out.String())
		require.Contains(t, out.String(), "config file: "+s.Key+";")
		require.Contains(t, out.String(), s.EnvName())
	}
	require.Contains(t, out.String(), "-config file")
}

func TestPropertiesSyntax(t *testing.T) {
	props, err := broker.ParseProperties("# comment\n! also a comment\n\n  a.b = 1 \nc:2\nd 3\ne=x\\\n  y\nf=\n")
	require.NoError(t, err)
	require.Equal(t, []broker.Property{
		{Key: "a.b", Value: "1", Line: 4},
		{Key: "c", Value: "2", Line: 5},
		{Key: "d", Value: "3", Line: 6},
		{Key: "e", Value: "xy", Line: 7},
		{Key: "f", Value: "", Line: 9},
	}, props)
}
