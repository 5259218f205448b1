package configs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Def describes one topic config (and the broker config that gives
// its default), with Kafka's names, types and defaults. Values are kept
// as strings, as on the wire.
type Def struct {
	Name       string          // topic config name, e.g. retention.ms
	BrokerName string          // broker-level default, e.g. log.retention.ms ("" = none)
	Type       kmsg.ConfigType // as reported by DescribeConfigs
	Default    string          // Kafka's default
	Doc        string
	// Check validates a value; nil accepts anything of the type.
	Check func(v string) error
}

// IntRange accepts the integers of [lo, hi].
func IntRange(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("value %q is not an integer", v)
		}
		if n < lo || n > hi {
			return fmt.Errorf("value %d is outside [%d, %d]", n, lo, hi)
		}
		return nil
	}
}

// OneOf accepts exactly one of vals.
func OneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, ok := range vals {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("value %q is not one of %v", v, vals)
	}
}

// IsBool accepts true and false.
func IsBool(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("value %q is not true or false", v)
	}
	return nil
}

// Int is a config value as an integer, def when it is not one (a value
// the tables validated is one; def covers an unset or empty value).
func Int(v string, def int64) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return def
	}
	return n
}

// FloatRange accepts the numbers of [lo, hi].
func FloatRange(lo, hi float64) func(string) error {
	return func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("value %q is not a number", v)
		}
		if f < lo || f > hi {
			return fmt.Errorf("value %v is outside [%v, %v]", f, lo, hi)
		}
		return nil
	}
}

// Float is a config value as a number, def when it is not one.
func Float(v string, def float64) float64 {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return def
	}
	return f
}

// CleanupPolicy parses cleanup.policy, Kafka's list of delete and
// compact (either order, each at most once, spaces around commas
// allowed): ok false for anything else, or an empty list.
func CleanupPolicy(v string) (compact, del, ok bool) {
	for _, part := range strings.Split(v, ",") {
		switch strings.TrimSpace(part) {
		case "compact":
			if compact {
				return false, false, false
			}
			compact = true
		case "delete":
			if del {
				return false, false, false
			}
			del = true
		default:
			return false, false, false
		}
	}
	return compact, del, true
}
