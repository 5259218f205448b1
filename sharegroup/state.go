package sharegroup

import "strconv"

// RecordState is the delivery state of one in-flight record. The numeric
// values are the persisted ids of KIP-932 (and the DeliveryState of the
// share-state RPCs), so they must never be renumbered.
type RecordState uint8

const (
	// StateAvailable records may be acquired by any member.
	StateAvailable RecordState = 0
	// StateAcquired records are locked by one member until acknowledged,
	// released or their acquisition lock expires. Never persisted.
	StateAcquired RecordState = 1
	// StateAcknowledged (ACCEPT) is terminal.
	StateAcknowledged RecordState = 2
	// StateArchiving means "archived once the dead-letter write is durable"
	// (KIP-1191). Not terminal: the SPSO cannot pass it.
	StateArchiving RecordState = 3
	// StateArchived (REJECT, GAP, delivery limit, absent from the log) is terminal.
	StateArchived RecordState = 4

	numStates = 5
)

var stateNames = [numStates]string{"available", "acquired", "acknowledged", "archiving", "archived"}

func (s RecordState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Terminal reports whether a record in this state is done for good: the
// SPSO may move past it.
func (s RecordState) Terminal() bool { return s == StateAcknowledged || s == StateArchived }

// outstanding reports whether a record in state s is to be delivered or in
// flight (Available or Acquired): in ordered mode its group has a head
// (msgGroups.open). An Archiving record waits for its dead-letter write
// and an ordered scan passes over it like a terminal one.
func (s RecordState) outstanding() bool { return s == StateAvailable || s == StateAcquired }

// persistable reports whether the state may appear in a persisted Record.
// Acquired is transient (KIP-932: "memory of the in-flight delivery will be
// lost").
func (s RecordState) persistable() bool { return s < numStates && s != StateAcquired }

// canBecome is the transition table of KIP-932 plus ARCHIVING (KIP-1191),
// the same rules as Kafka's RecordState.validateTransition. Every live
// transition a member, a lock timer or a session close causes obeys it.
//
// One administrative exception lives outside the table: an AVAILABLE record
// that the log reports absent (compacted away, aborted, control batch,
// below the log start) is archived without being delivered; see
// archiveAbsent.
func (s RecordState) canBecome(next RecordState) bool {
	switch s {
	case StateAvailable:
		return next == StateAcquired
	case StateAcquired:
		return next == StateAvailable || next == StateAcknowledged || next == StateArchived || next == StateArchiving
	case StateArchiving: // dead-letter write pending; not terminal
		return next == StateArchived
	default: // StateAcknowledged and StateArchived are terminal.
		return false
	}
}

// AckType is the acknowledgement type of ShareFetch/ShareAcknowledge.
// Values are the wire values.
type AckType uint8

const (
	AckGap     AckType = 0 // offset absent from the log (compaction hole, control record) → StateArchived
	AckAccept  AckType = 1 // processed → StateAcknowledged
	AckRelease AckType = 2 // give back → StateAvailable, or Archived/StateArchiving at the delivery limit
	AckReject  AckType = 3 // unprocessable → StateArchived (StateArchiving with a dead-letter queue)
	AckRenew   AckType = 4 // KIP-1222: restart the acquisition lock; state and count unchanged

	maxAckType = AckRenew
)

var ackNames = [...]string{"gap", "accept", "release", "reject", "renew"}

func (t AckType) String() string {
	if int(t) < len(ackNames) {
		return ackNames[t]
	}
	return "ack(" + strconv.Itoa(int(t)) + ")"
}

// AcquireMode is ShareFetch v2's ShareAcquireMode (KIP-1206).
type AcquireMode uint8

const (
	// BatchOptimized acquires whole log batches: it may exceed maxRecords up
	// to the end of the last log batch it touched.
	BatchOptimized AcquireMode = 0
	// RecordLimit acquires exactly at most maxRecords offsets; the rest of a
	// log batch stays available.
	RecordLimit AcquireMode = 1
)

func (m AcquireMode) String() string {
	switch m {
	case BatchOptimized:
		return "batch_optimized"
	case RecordLimit:
		return "record_limit"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}
