package main

// docHeader opens docs/BENCHMARKS.md when --out creates it. Later runs
// only replace the generated section between the bench markers, so edits
// to this prose in the file survive.
const docHeader = `# Benchmarks

Issue #2 ("Speed") asks for Shoal to be measured against franz-go's kfake under the same load, on the same machine, in the
same run; issues #3 (consumer groups) and #4 (share groups) add a group and a share-consumer workload with goals of their
own. ` + "`go run ./scripts/bench`" + ` does all of that and writes the section below with ` + "`--out docs/BENCHMARKS.md`" + `
(` + "`--json file`" + ` keeps the raw numbers; ` + "`go run ./scripts/bench --help`" + ` lists every flag). ` + "`--phases`" + ` picks workloads, for
example ` + "`go run ./scripts/bench --records 100000 --rounds 1 --phases produce,group,share`" + `; the default runs all six.

## Method

- **Same machine, same run, fresh state.** Each round starts every target inside the bench process on ` + "`127.0.0.1:0`" + `
  with a new temporary data directory, drives it over loopback TCP with franz-go (kgo) clients, shuts it down and deletes the
  directory, then calls sync(2) and pauses (` + "`--cooldown`" + `) so the next target does not pay for the last one's writeback.
- **Both fsync before acknowledging.** Shoal runs with ` + "`Fsync: FsyncAlways`" + ` (acks=all is answered only after the data
  is fsynced; fsyncs are grouped across requests and partitions). kfake runs with ` + "`kfake.DataDir`" + ` and
  ` + "`kfake.SyncWrites()`" + `, which fsyncs the segment and index files after every produced batch. Neither is tuned beyond that:
  both keep their group settings at their defaults too (see the group workload for what that means).
- **Alternating, medians of N.** Targets alternate order every round (A, B, then B, A, …) and the summary reports, for each
  metric separately, the median over N rounds (default 3). Per-round tables follow the summary.
- **Workloads** (run in this order within a round).
  1. *Produce*: N records (default 1,000,000) with 1 KiB values and no key, from 4 goroutines sharing one kgo client, into a
     6-partition topic, acks=all, idempotent, as fast as the client accepts them. Reported: records/s, MB/s, and per-record
     ack latency from the ` + "`Produce`" + ` call to its promise (p50, p99).
  2. *Consume*: one kgo consumer reads the topic from the start until every partition reaches the end offset listed before the
     phase began, checking that offsets are contiguous and values intact. Reported: records/s, MB/s.
  3. *End-to-end*: a second 6-partition topic receives 5,000 records/s for 10 s, each carrying its send time; a consumer in
     the same process records now − sent for each one (p50, p99, p99.9). A few warm-up records go first so that
     connections, producer id and the first fetch are not measured.
  4. *Group* (issue #3): a consumer group of 4 members (` + "`--group-members`" + `), each its own kgo client with the same fresh
     group id, the classic protocol and kgo's default balancer, cooperative-sticky (` + "`--group-balancer`" + `), drains the
     produce phase's topic from the start. Commits (` + "`--group-commit poll`" + `, the default): ` + "`DisableAutoCommit`" + ` and
     ` + "`BlockRebalanceOnPoll`" + `, and after every poll a synchronous ` + "`CommitUncommittedOffsets`" + ` followed by ` + "`AllowRebalance`" + `
     (` + "`--group-commit auto`" + ` uses kgo's 5 s autocommit plus one commit per member at the end instead). Every (partition,
     offset) is marked in a bitmap, so "every record consumed at least once" is checked exactly and records delivered
     again are counted. The clock starts at the first record delivered to any member and stops when every record has been
     consumed and every member's commit of its last poll has been answered. Afterwards (untimed) the group's committed
     offsets (OffsetFetch) must equal the end offsets, or the run reports an error. Reported: records/s and MB/s of
     distinct records, and apart from them the time from creating the clients to the first record. That time is mostly
     joining: Shoal applies Kafka's ` + "`group.initial.rebalance.delay.ms`" + ` default (3 s: the first rebalance of an empty
     classic group waits for more members, so all 4 are in the first assignment), kfake has no such delay and rebalances
     as members arrive, while they consume. That is why the startup is its own row rather than part of the rate.
  5. *Share* (issue #4): 4 share consumers (` + "`--share-members`" + `), each its own kgo client with ` + "`kgo.ShareGroup`" + ` and a fresh
     share group, drain the same topic, calling ` + "`Record.Ack(kgo.AckAccept)`" + ` on every record. Before they start,
     ` + "`share.auto.offset.reset=earliest`" + ` is set on the group with IncrementalAlterConfigs on the GROUP resource (both
     targets honour it; without it a share group starts at the log end). kgo's defaults otherwise, among them
     ` + "`ShareMaxRecords`" + ` 500 (` + "`--share-max-records`" + `). The ratio depends on it: in one 300,000-record smoke run, 2,000
     roughly doubled kfake's rate and raised Shoal's by about a fifth. Distinct records are counted as for the group; the clock starts at the first record delivered and stops when
     every record has been delivered and accepted and every member's ` + "`FlushAcks`" + ` has returned (the broker answered the
     accepts; ack errors from ` + "`ShareAckCallback`" + ` are reported). Afterwards (untimed) every share-partition's start offset
     (DescribeShareGroupOffsets) must equal the end offset, i.e. everything was accepted. Reported as for the group.
     Both drain phases also report a steady rate: distinct records between the deliveries of 10% and 90% of them, over
     that time. It leaves out the start and the final acknowledgements' tail (a share consumer's last accepts ride on a
     ShareFetch that long-polls the empty queue first), which weigh most when the drain itself is short.

  6. *Txn* (issue #7): the produce phase's load (same record count, value size and client settings) from ` + "`--producers`" + `
     clients (4), each with its own ` + "`TransactionalID`" + ` and goroutine, as the produce phase runs 4 goroutines (the
     transactions of one transactional id are sequential, so parallel producers are how a pipeline scales), in
     transactions of 1,000 records (` + "`--txn-records`" + `): each transaction is ` + "`BeginTransaction`" + `, the
     records, ` + "`Flush`" + `, ` + "`EndTransaction(TryCommit)`" + `, into a topic of its own. Reported: records/s, and
     that rate as a percentage of the produce phase's in the same round (issue #7: at least 50%).

  The group and share phases read the records the produce phase wrote in the same round on the same fresh target, each
  with a group of its own (nothing is consumed destructively), so they need ` + "`produce`" + ` in ` + "`--phases`" + `.
- **Client settings** are chosen so the client is not the bottleneck: ` + "`ProducerLinger`" + ` 0 (batches form while requests
  are in flight; kgo keeps up to 5 idempotent produce requests in flight per broker), ` + "`MaxBufferedRecords`" + ` 65,536,
  ` + "`ProducerBatchMaxBytes`" + ` 1 MiB, no compression, values taken from one reused buffer, records and promises pooled;
  consumers (including group members and share consumers) ` + "`FetchMaxBytes`" + ` 64 MiB and ` + "`FetchMaxPartitionBytes`" + ` 1 MiB
  (Kafka's default; larger values were slower against kfake here). ` + "`--target ceiling`" + ` adds a kfake that stores nothing
  (` + "`BlackholeProduce`" + ` and ` + "`SyntheticFetch`" + `): what the clients reach against it is roughly the most this machine's client
  side can do, so it is an upper bound for the other columns. It serves no stored records to groups or share groups, so
  the group and share phases skip it.
- **Ack latency under saturation is mostly queueing in the client.** In the produce phase the buffer is always full, so a record
  waits roughly buffered records ÷ throughput before it is even sent (Little's law). The numbers compare the two targets
  under the same buffer size; the fixed-rate end-to-end phase is the latency measurement proper.
- **Goals.** The "Issue goal" column names the issue each goal comes from: #2's absolute figures and at least 1.2× kfake on
  each of its rows, #3's at least 1.2× kfake for the group, #4's at least 300,000 records/s and 1.5× kfake for the share
  consumers. "Met" is judged on the medians (on the one round when there is one).
- **Memory is process-wide.** Both brokers and all clients live in the bench process, so the memory tables show the process's
  VmRSS (from /proc/self/status) and Go ` + "`HeapInuse`" + `, each sampled after a GC and ` + "`runtime/debug.FreeOSMemory`" + `
  (which returns freed memory to the OS) at the start and end of every phase, plus the peak RSS during the phase (VmHWM,
  reset through /proc/self/clear_refs at the phase start). What a broker keeps after the produce phase shows whether its
  memory tracks the size of its log; the "whole run" row is before the target started and after it closed.
- **Share-partition RAM per in-flight record** (issue #4) is not a process-wide figure and does not come from this tool:
  it comes from ` + "`go test -run XXX -bench BenchmarkInFlightMemory ./sharegroup/`" + `, which builds one share-partition with
  120,000 in-flight records and reports live heap (runtime.MemStats after a GC) per record as ` + "`B/record`" + `. One run
  (2026-11-30, the 2-core AMD EPYC below, Go 1.26.8, commit f46e022 with uncommitted changes) printed:
  batch-acquired (acquired in fetches of 500) **0.12 B/record** (240 runs); every other record accepted **8.50 B/record**;
  every other record released **8.51 B/record**; every other record accepted, the rest available after a restart
  **8.26 B/record** (120,000 runs each); pathological, one record per fetch so every record has its own acquisition
  **61.11 B/record** (120,000 runs).
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
- **Plots.** With ` + "`--out`" + `, the tool also draws PNGs with gonum/plot into ` + "`plots/`" + ` next to the markdown file (` + "`--plots DIR`" + `
  elsewhere, ` + "`--plots none`" + ` for none) and embeds them in the generated section: median throughput per phase for each
  target, records/s over time for every phase and round (sampled every 250 ms, drawn as a 1 s moving window), and the
  produce and end-to-end latency by percentile (p50 to p99.99 and the maximum, median over rounds). While it runs it prints
  a progress line per phase every second with the share of the phase's records done.
`
