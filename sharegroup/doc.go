// Package sharegroup is the pure KIP-932 share-group core: the
// share-partition state machine (Partition), its persisted records (Record)
// and the "simple" share assignor (AssignSimple). Vocabulary and rules come
// from the design notes' kip932.md (SPSO, SPEO, acquisition lock, delivery count).
//
// # Contract
//
// The package imports the standard library only. It starts no goroutines,
// reads no clock, does no I/O and does not log: time arrives as the now
// argument, results and Effects come back as values. A Partition is not
// safe for concurrent use; the broker gives each (group, topic, partition)
// exactly one owner, which for every operation:
//
//  1. calls the Partition (Acquire, Acknowledge, ExpireLocks,
//     ReleaseMember, AdvanceLogStart, CompleteArchiving, Reset);
//  2. persists Effects.Records, in order, durably (sharegroup/store) —
//     possibly group-committed with other partitions, and possibly
//     waiting for the sync without holding the Partition, so later
//     operations go on meanwhile (their records are submitted after it).
//     No answer to an operation (an acknowledgement's result) may leave
//     before every record up to and including that operation's is
//     durable. What later operations hand out may leave sooner, except in
//     ordered mode a message group's record whose previous record an
//     Acknowledge not yet durable ended (AcquiredAfter): a crash may then
//     deliver a record again, as it always can, never out of order, and
//     never undo an answered acknowledgement;
//  3. answers;
//  4. re-arms its lock timer for Effects.NextDeadline (zero: none), which
//     calls ExpireLocks through the same owner.
//
// If persisting fails the owner discards the Partition and rebuilds it with
// Recover from what is durable: the core never rolls back (the store
// refuses every write of it made in between). Effects returned
// together with an error (an acknowledgement that failed after due locks
// expired) must be persisted too. Slices returned (Acquired, Records,
// Ranges) are owned by the caller.
//
// Every operation that takes now first expires the locks due at now, so a
// late acknowledgement fails even if the timer has not fired yet, and the
// result never depends on timer jitter.
//
// # The in-flight window
//
// The window is [SPSO, SPEO): SPSO is the first non-terminal offset, SPEO
// the next offset never fetched (Kafka's inclusive endOffset is SPEO-1; the
// limit MaxInFlight bounds SPEO-SPSO, Kafka's SPEO-SPSO+1). It is stored as
// a sorted slice of runs: maximal stretches of offsets with identical
// (state, delivery count, acquisition). A run is 8 bytes, one word — its
// start relative to a base offset (30 bits; a window spanning more is
// rebased) and above it state (3 bits), delivery count (10 bits,
// saturating at 1,023) and acquisition handle (21 bits). The member and the lock deadline are not in the run: every Acquire
// call (and every RENEW) creates one acquisition {deadline, member handle,
// offset bounds, reference count} shared by all its runs; member ids are
// interned to small handles that live while the member holds an
// acquisition. Acquisitions sit in a min-heap by deadline for
// NextDeadline/ExpireLocks. Measured (BenchmarkInFlightMemory, live heap
// after GC at 120,000 in flight): ~0.1 B/record when acquired in 500-record
// fetches, ~8.5 B/record in the worst realistic case of every other record
// acknowledged or released individually (120,000 runs).
//
// Every mutation goes through rewrite: the runs covering a range are
// rebuilt in a scratch buffer (merging equal neighbours, accounting state
// counters and acquisition references) and spliced back once, so an
// acknowledgement costs O(runs touched + log n) plus one memmove of the
// tail. The slice grows by 1/8, not 2x, to keep slack small; the prefix the
// SPSO passes is re-sliced away.
//
// Rejected designs: a per-offset map (kfake; ~50-100 B/record); Kafka's
// InFlightBatch with a lazily created per-offset map (a partially
// acknowledged batch costs a map entry per offset); a B-tree/chunked run
// list (O(log n) splices but 50% node fill doubles the worst-case bytes per
// record — worth revisiting only if profiles show the memmove). Deadlines
// per run (8 more bytes per run) lost to the acquisition table.
//
// # States and transitions
//
// RecordState values are KIP-932's persisted ids: Available 0, Acquired 1,
// Acknowledged 2, Archiving 3, Archived 4. canBecome is the transition
// table; every live transition is checked against it (a violation panics:
// it is a bug). The single administrative exception is archiving offsets
// the log reports absent (compaction holes, LogBatch.Skip batches, offsets
// below a new log start), which never reach a member.
//
// Delivery count: +1 on acquisition; RELEASE and lock expiry at count >=
// DeliveryCountLimit archive; ReleaseMember (session close, disconnect)
// returns records Available with the count decremented and never archives.
//
// # Persistence
//
// Acquisitions and renewals are transient. The durable view of an offset is
// its state, except that Acquired(c) is durably Available(c-1) — exactly
// what it was before it was acquired. Each operation emits at most one
// delta Record listing the ranges whose durable view changed (so a
// session-close release or a RENEW writes nothing) and the new SPSO;
// snapshots (New, Reset, Snapshot) list every range that is not Available
// with count 0. Apply replays both through the same rewrite path. The
// invariant, checked after every step of the script and property tests,
// is: Recover(all records emitted so far) == the durable view of the live
// partition. Consequently on restart acknowledged records are never
// redelivered and everything else at or above the SPSO comes back Available
// with its last persisted count. Record encoding: see Record.AppendBinary.
//
// # Dead-letter queues (KIP-1191)
//
// With Config.DeadLetter, REJECT and the delivery limit go Acquired →
// Archiving (persisted, not terminal, so the SPSO waits); the broker lists
// them with Archiving(), writes the DLQ record idempotently and calls
// CompleteArchiving once the write is durable. After a crash the Archiving
// ranges are still there and the writes resume.
//
// # Message groups (Config.Groups)
//
// In a group mode the broker reads the log from ClassifyOffset and passes
// the batches with per-record group ids (LogBatch.Groups, from the key or
// a header) to Classify; AcquireGroups then picks from what is known. The
// group of every offset in [SPSO, known) is kept as compacted spans (start
// offset, group handle: 16 bytes per change of group) beside the runs:
// group ids never change, states do, so the two are not mixed and plain
// mode pays nothing. Ids are interned to handles that live while a span
// references them. Spans are transient: after a restart (or a switch into
// a group mode) known starts at the SPSO and the broker classifies the
// window again; persistence is unchanged.
//
//   - Fair (GroupsFair): AcquireGroups visits the spans round-robin from
//     the span after where the previous call stopped, giving each group at
//     most ceil(maxRecords/groups) records, raising the share in up to 8
//     further passes while some groups have more and the request is not
//     full. A group with 100x the records of the others therefore takes
//     the same share per call as each of them.
//   - Ordered (GroupsOrdered): a scan from the SPSO takes, per group, the
//     group's first offset that is neither terminal nor Archiving; a group
//     with any record Acquired (or backing off) is skipped. So at most one
//     record per group is in flight, the next is delivered only after the
//     previous is acknowledged, archived or dead-lettered, and a released
//     or expired record is redelivered first. (After a switch from another
//     mode a group may hold several records, or have an earlier record
//     Available again behind later ones in flight: it waits until none is
//     in flight. After a switch from plain mode, while records in flight
//     lie beyond what Classify has reached, their groups are unknown and
//     every group waits.) Records without a group are not ordered. Each
//     group keeps counts of its records in the window that are Available
//     or Acquired and, in ordered mode, of the Acquired ones (below); the
//     groups with the first and not the second are the ready ones, whose
//     heads the scan takes, and records without a group are counted the
//     same way. The scan skips the other groups without looking at their
//     records, stops once it has found every ready group's head and every
//     record without a group to deliver, and does not run when there are
//     none (the common fetch of a member whose acknowledgements another
//     member's fetch already answered: in sharebench's ordered drains three
//     to four scans in five found nothing). Its worst case is the window
//     up to the last ready group's head or record without a group.
//   - Heads shared among members (HeadShare): in ordered mode the groups'
//     heads are all there is to hand out, and a member's acknowledgements
//     free heads its own next fetch would take straight back. A member
//     that acknowledges at once may do so (few large fetches are cheaper
//     than many small ones), but a member that takes long to process what
//     it holds would leave the others idle. For such a member the broker
//     asks HeadShare, which bounds it to ceil(heads / contenders) records
//     while another waiting member holds fewer; the contenders are the
//     member, the waiting members and every member holding records. The
//     heads are counted without walking the window (a walk per fetch,
//     under the share-partition's lock, cost a fifth of the throughput
//     with slow consumers): from the counts above, updated at every change
//     of state, the groups with a record Available or Acquired are the
//     heads (a finished group stays live until the SPSO passes it, but has
//     none). A group whose next record waits out a redelivery backoff
//     still counts.
//   - No starvation: in Kafka's design (and the seed's) the window limit
//     bounds SPEO-SPSO, so one group occupying 120,000 consecutive records
//     at the SPSO blocks every other group. In a group mode the limit
//     bounds what the window costs instead — runs plus spans up to
//     MaxInFlight (CanClassify) — and SPEO-SPSO only by maxSpan/2. A
//     blocked group's never-delivered records are one Available(0) run and
//     one span however many there are, so the window extends past them to
//     the other groups (TestGroupsHugeGroupDoesNotStarveOthers). They are
//     implicit on disk (Available, count 0), so persistence is unchanged.
//     MaxInFlight still caps the records locked at once (acquisitions
//     hold at most MaxInFlight offsets), as share.partition.max.record.locks
//     does in Kafka. Acquisition pauses while the runs alone exceed 2 x
//     MaxInFlight (a window of millions of records acknowledged one by one
//     in a scattered order), which bounds memory at ~24 B per record of
//     budget.
//
// # Redelivery backoff
//
// With Config.RedeliveryBackoff, a RELEASE or a lock expiry below the
// delivery limit makes the record wait backoff * 2^(count-1), capped by
// RedeliveryBackoffMax, before it is Available. The waiting records are
// Acquired by a reserved internal member (backoffMember) with their count
// plus one, sharing one acquisition per deadline: runs stay 8 bytes, their
// durable view is exactly Available(count), they block their group in
// ordered mode (so FIFO holds), other records are not delayed, and the
// lock heap wakes them: their "expiry" returns them Available without
// counting a delivery. The delay is transient: after a restart they are
// Available at once.
package sharegroup
