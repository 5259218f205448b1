package main

// docHeader opens docs/BENCHMARKS.md when --out creates it. Later runs
// only replace the generated section between the bench markers, so edits
// to this prose in the file survive.
const docHeader = `# Benchmarks

Issue #2 ("Speed") asks for Shoal to be measured against franz-go's kfake under the same load, on the same machine, in the
same run. ` + "`go run ./scripts/bench`" + ` does that and writes the section below with ` + "`--out docs/BENCHMARKS.md`" + `
(` + "`--json file`" + ` keeps the raw numbers; ` + "`go run ./scripts/bench --help`" + ` lists every flag).

## Method

- **Same machine, same run, fresh state.** Each round starts every target inside the bench process on ` + "`127.0.0.1:0`" + `
  with a new temporary data directory, drives it over loopback TCP with franz-go (kgo) clients, shuts it down and deletes the
  directory, then calls sync(2) and pauses (` + "`--cooldown`" + `) so the next target does not pay for the last one's writeback.
- **Both fsync before acknowledging.** Shoal runs with ` + "`Fsync: FsyncAlways`" + ` (acks=all is answered only after the data
  is fsynced; fsyncs are grouped across requests and partitions). kfake runs with ` + "`kfake.DataDir`" + ` and
  ` + "`kfake.SyncWrites()`" + `, which fsyncs the segment and index files after every produced batch. Neither is tuned beyond that.
- **Alternating, medians of N.** Targets alternate order every round (A, B, then B, A, …) and the summary reports, for each
  metric separately, the median over N rounds (default 3). Per-round tables follow the summary.
- **Workloads.**
  1. *Produce*: N records (default 1,000,000) with 1 KiB values and no key, from 4 goroutines sharing one kgo client, into a
     6-partition topic, acks=all, idempotent, as fast as the client accepts them. Reported: records/s, MB/s, and per-record
     ack latency from the ` + "`Produce`" + ` call to its promise (p50, p99).
  2. *Consume*: one kgo consumer reads the topic from the start until every partition reaches the end offset listed before the
     phase began, checking that offsets are contiguous and values intact. Reported: records/s, MB/s.
  3. *End-to-end*: a second 6-partition topic receives 5,000 records/s for 10 s, each carrying its send time; a consumer in
     the same process records now − sent for each one (p50, p99, p99.9). A few warm-up records go first so that
     connections, producer id and the first fetch are not measured.
- **Client settings** are chosen so the client is not the bottleneck: ` + "`ProducerLinger`" + ` 0 (batches form while requests
  are in flight; kgo keeps up to 5 idempotent produce requests in flight per broker), ` + "`MaxBufferedRecords`" + ` 65,536,
  ` + "`ProducerBatchMaxBytes`" + ` 1 MiB, no compression, values taken from one reused buffer, records and promises pooled;
  consumer ` + "`FetchMaxBytes`" + ` 64 MiB and ` + "`FetchMaxPartitionBytes`" + ` 1 MiB (Kafka's default; larger values were slower
  against kfake here). ` + "`--target ceiling`" + ` adds a kfake that stores nothing (` + "`BlackholeProduce`" + ` and
  ` + "`SyntheticFetch`" + `): what the clients reach against it is roughly the most this machine's client side can do, so
  it is an upper bound for the other columns.
- **Ack latency under saturation is mostly queueing in the client.** In the produce phase the buffer is always full, so a record
  waits roughly buffered records ÷ throughput before it is even sent (Little's law). The numbers compare the two targets
  under the same buffer size; the fixed-rate end-to-end phase is the latency measurement proper.
- **Memory is process-wide.** Both brokers and all clients live in the bench process, so the memory tables show the process's
  VmRSS (from /proc/self/status) and Go ` + "`HeapInuse`" + `, each sampled after a GC and ` + "`runtime/debug.FreeOSMemory`" + `
  (which returns freed memory to the OS) at the start and end of every phase, plus the peak RSS during the phase (VmHWM,
  reset through /proc/self/clear_refs at the phase start). What a broker keeps after the produce phase shows whether its
  memory tracks the size of its log; the "whole run" row is before the target started and after it closed.
- **Where the issue is silent we do what Kafka does**: MB = 2^20 bytes of record values, as ` + "`kafka-producer-perf-test`" + `
  prints it (record overhead and protocol framing are not counted); the consumer's per-partition fetch size is Kafka's
  ` + "`max.partition.fetch.bytes`" + ` default. Latency quantiles come from a log-linear histogram accurate to 0.8%.
- **Profiles.** ` + "`--cpuprofile-dir DIR`" + ` writes one CPU profile per target and round. Client goroutines carry the
  pprof labels ` + "`side=client`" + ` and ` + "`phase=…`" + `, broker goroutines none, so
  ` + "`go tool pprof -tagignore side=client DIR/shoal-r1.pprof`" + ` shows the broker's share (plus the runtime's: GC is shared
  by everything in the process).
- **The machine has 2 cores** and client, broker and fsync all compete for them, which is the setting issue #2's targets
  are stated for. Other jobs on the machine (tests, builds, other fsyncs on the same disk) move the numbers a lot; run it on
  an otherwise idle machine. Medians over alternating rounds are the headline for that reason.
- ` + "`--from-json FILE`" + ` re-renders the tables (and ` + "`--out`" + `) from a saved ` + "`--json`" + ` file without running anything.
`
