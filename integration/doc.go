// Package integration holds black-box tests of the Shoal broker.
//
// The tests talk to a broker over the network only, using real client
// libraries (franz-go kgo/kadm, IBM/sarama, segmentio/kafka-go), real client
// tools (kcat, kafka-python) and hand-built frames encoded with kmsg. They
// import package broker for one thing: starting an in-process broker on
// 127.0.0.1:0 with a fresh temporary data directory, one per test.
//
// # Running against another broker
//
// Set SHOAL_TEST_SEEDS to a comma-separated list of host:port seeds to run
// the client tests against an external cluster instead (real Kafka, kfake,
// or a Shoal started by hand), the way franz-go's own suite uses KGO_SEEDS:
//
//	SHOAL_TEST_SEEDS=127.0.0.1:9092 go test ./integration/
//
// Every test then creates its own uniquely named topics, so the suite can
// share one cluster. Tests that need a broker configured in a particular way
// (auto-creation off, a small request limit) and the crash test, which needs
// the shoal binary, skip themselves in that mode.
//
// # Tools
//
// The kcat tests (including a `kcat -G` balanced consumer group) and the
// kafka-python test need `kcat` on PATH and the kafka module
// importable by /usr/bin/python3 (Debian packages kcat and python3-kafka).
// When the CI environment variable is set a missing tool fails the test;
// otherwise the test is skipped.
//
// # Crash test
//
// crash_test.go builds cmd/shoal once, runs it as a child process with
// --fsync always and SIGKILLs it at random moments while idempotent acks=all
// producers write self-describing values; after every restart it reads each
// partition back and checks that every acknowledged record is at its
// original offset, offsets have no gaps and no value appears twice. The
// number of kills is SHOAL_CRASH_CYCLES (default 25 when CI is set, 5
// otherwise); SHOAL_CRASH_SEED replays a run's random schedule.
//
// share_crash_test.go does the same during share-group consumption: four
// franz-go share consumers accept, release and reject records while the
// broker is SIGKILLed as many times; no record whose accept was confirmed
// is delivered again, none is lost, no delivery count exceeds the limit,
// and at the end every share-partition start offset equals the log end.
// Both crash tests run alone (not in parallel) and use the same variables.
//
// # Lost answers
//
// lostresp_test.go puts a TCP proxy (package faultproxy) between the
// clients and the broker (the broker advertises the proxy's address)
// that, for a fraction of the answers to chosen APIs, drops the answer
// and closes the connection, forwards part of it and closes, or holds it
// past the client's request timeout. Idempotent producers must see every record stored exactly once
// at the offset they were told, in order; transactional producers must see
// every confirmed commit whole and exactly once under read_committed,
// nothing aborted, and an unconfirmed commit whole or not at all.
// SHOAL_LOST_SCALE multiplies their volume (default 1: about 20,000
// Produce requests and 800 transactions). lost_txn_test.go,
// lost_groups_test.go and lost_share_test.go script one lost answer (or
// request) each, placed exactly with faultproxy.Proxy.Next, for every
// stateful request: the transaction requests, group joins, syncs,
// heartbeats and leaves of both protocols, share fetches and
// acknowledgements; each asserts what Kafka answers the retry.
//
// # Exactly once through dying connections
//
// eos_test.go runs the workloads of package workload (a transactional
// consume-transform-produce chain, a consumer group committing
// synchronously, a share group draining a topic) with the fault proxy
// cutting every client connection at a random age of 0.5-1.5 s; the
// chain also through an idle proxy and directly. It is CI's short
// profile (one run per case); scripts/eossoak is the long one, against
// kfake side by side. SHOAL_EOS_SCALE multiplies the records.
package integration
