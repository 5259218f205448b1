// Package metrics holds the Prometheus event metrics of one broker, on a
// registry of its own (never the global one: tests start many brokers in
// one process), served on /metrics by the broker's HTTP server.
//
// Two kinds of metrics:
//
//   - event metrics, here, updated where the event happens: requests and
//     their latency (the root's conn.go), bytes and records in and out
//     per topic (Produce, Fetch, ShareFetch), connections, fsync latency
//     (the syncer), share-group lock expiries, archived records and
//     delivery counts, dead-letter writes and quota throttles. The hot
//     paths never build label strings or look up a label map: the
//     children are resolved once, per (API key, version) on its first
//     request and per topic when a partition is opened, and kept next to
//     the code that updates them.
//   - state metrics, read from the broker's state at scrape time by the
//     collectors New registers beside these (the root's
//     metrics_state.go): partition offsets and sizes, consumer-group lag,
//     share-group records per state, disk usage. Nothing is updated on
//     append for them, and this package reads no one's state.
//
// Names follow Prometheus conventions: the shoal_ prefix, _total for
// counters, base units (_seconds, _bytes).
//
// It takes no locks of its own beyond the atomics of its slots and the
// client library's; anything may update a metric under any lock. It
// imports only the Prometheus client.
package metrics
