package sharegroup

import "time"

// Lock and redelivery-backoff deadlines are kept as nanoseconds since
// clockBase, taken with the monotonic clock whenever both times carry a
// monotonic reading (every time.Now does): a step of the wall clock
// neither expires locks early nor holds them longer (reliability target
// T15). None of them is persisted. Times without a monotonic reading
// (tests' fixed clocks) fall back to their wall-clock difference, so a
// deadline still reads back as the wall time it was computed from.
var clockBase = time.Now()

// clockNanos is t as nanoseconds since clockBase.
func clockNanos(t time.Time) int64 { return int64(t.Sub(clockBase)) }

// clockTime is the time of a deadline from clockNanos; it carries a
// monotonic reading, so t.Sub(time.Now()) is immune to wall-clock steps.
func clockTime(ns int64) time.Time { return clockBase.Add(time.Duration(ns)) }
