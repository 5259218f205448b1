package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

// Storage is etcd raft's Storage over a replica's partition log: entry i
// is the log's batch of ordinal i (log.Partition.FirstOrdinal and
// NextOrdinal bound them), its term the batch's partition leader epoch,
// kept in the term cache (Terms) so Term(i) reads no batch. Beside the
// log it keeps raft.state (HardState and ConfState) and raft.terms.
//
// Writers: Append (raft's MsgStorageAppend entries, written to the page
// cache; the replica's Sync makes them durable before it acknowledges
// them), SetHardState and SetConfState. Raft's goroutine reads it
// meanwhile; every method is safe for concurrent use. A write error
// leaves the Storage failed: every later call returns it, since raft
// "will become inoperable" anyway and the replica must stop.
type Storage struct {
	fs  log.FS
	dir string
	p   *log.Partition

	mu     sync.Mutex
	state  State
	terms  *Terms
	failed error
	// parts is Append's scratch for the encoded batches, one per entry
	// (cleared after each use, so it pins no entry's data).
	parts [][]byte
	// recent holds the entries Append wrote that raft has not applied
	// yet, as raft handed them over: entries recentFirst on. Raft reads
	// every committed entry back to apply it (and a follower a little
	// behind gets its appends from here): served from recent, that costs
	// no read, copy or decode of the log. At most maxRecentBytes of Data.
	recent      []*raftpb.Entry
	recentFirst uint64
	recentBytes int
}

// maxRecentBytes bounds Storage.recent (entries wait there from their
// append to their apply: milliseconds, while a majority is up).
const maxRecentBytes = 16 << 20

// ErrCorruptLog is a replica directory whose log, raft.state and
// raft.terms contradict each other: a raft.state missing beside a
// non-empty log, or terms the batches do not carry.
var ErrCorruptLog = errors.New("raftlog: replica log and raft files disagree")

// Open recovers the raft storage of the replica whose log p (opened with
// log.Config.Replica) lives in dir. It reads raft.state and raft.terms,
// drops the term runs a crash left beyond the log's end, checks the
// cache against the batches' leader epochs (rebuilding it from the
// batches if raft.terms is damaged), and raises the log's high
// watermark as raft hands entries back (SetApplied). A new
// replica has neither file and an empty log.
func Open(fsys log.FS, dir string, p *log.Partition) (*Storage, error) {
	if snap, ok, err := readReset(fsys, dir); err != nil {
		return nil, err
	} else if ok { // a snapshot's install was interrupted: finish it
		st, _, err := ReadState(fsys, dir)
		if err != nil {
			return nil, err
		}
		s := &Storage{fs: fsys, dir: dir, p: p, state: st}
		if err := s.install(snap, time.Now()); err != nil {
			return nil, err
		}
	}
	st, found, err := ReadState(fsys, dir)
	if err != nil {
		return nil, err
	}
	terms, tfound, err := ReadTerms(fsys, dir)
	rebuild := errors.Is(err, ErrCorruptTerms)
	if err != nil && !rebuild {
		return nil, err
	}
	first, next := uint64(p.FirstOrdinal()), uint64(p.NextOrdinal())
	empty := first == next
	if !found && (!empty || tfound || first > 1) {
		return nil, fmt.Errorf("%w: %s has no %s beside a log of entries [%d, %d)", ErrCorruptLog, dir, StateFile, first, next)
	}
	if !found {
		st = State{Hard: &raftpb.HardState{}, Conf: &raftpb.ConfState{}}
	}
	s := &Storage{fs: fsys, dir: dir, p: p, state: st}
	if !rebuild {
		terms.TruncateFrom(next) // a crash lost the tail they describe
		rebuild = !s.termsMatch(terms, first, next)
	}
	if rebuild {
		var dummy *termRun
		if terms != nil && first > 1 {
			if t, ok := terms.Term(first - 1); ok {
				dummy = &termRun{term: t, first: first - 1}
			}
		}
		if first > 1 && dummy == nil {
			return nil, fmt.Errorf("%w: %s: raft.terms is unusable and the term of entry %d, before the log, is lost", ErrCorruptLog, dir, first-1)
		}
		if terms, err = s.scanTerms(dummy, first, next); err != nil {
			return nil, err
		}
		if err := WriteTerms(fsys, dir, terms); err != nil {
			return nil, err
		}
	}
	s.terms = terms
	hard := st.Hard
	if hard == nil {
		hard = &raftpb.HardState{}
	}
	s.state.Hard = proto.Clone(hard).(*raftpb.HardState)
	s.state.Hard.Commit = proto.Uint64(min(max(hard.GetCommit(), first-1), next-1))
	// The high watermark stays at the log start: it follows what raft
	// hands back as applied (SetApplied), which it does again after a
	// restart from the replica's applied index on.
	return s, nil
}

// termsMatch checks the cache against the log: every run that starts in
// the log starts at a batch of its term and offset, and the last batch
// has the last term.
func (s *Storage) termsMatch(t *Terms, first, next uint64) bool {
	if first == next {
		return true
	}
	for _, r := range t.runs {
		if r.first < first {
			continue
		}
		h, err := s.header(r.first)
		if err != nil || uint64(h.PartitionLeaderEpoch) != r.term || h.BaseOffset != r.offset {
			return false
		}
	}
	h, err := s.header(next - 1)
	last, ok := t.Term(next - 1)
	return err == nil && ok && uint64(h.PartitionLeaderEpoch) == last
}

// header reads batch i's header.
func (s *Storage) header(i uint64) (protocol.BatchHeader, error) {
	b, _, err := s.p.ReadOrdinals(nil, int64(i), int64(i)+1, 0)
	if err != nil {
		return protocol.BatchHeader{}, err
	}
	return protocol.ParseBatchHeader(b)
}

// scanTerms rebuilds the term cache from the batches [first, next),
// after dummy (the entry before the log, if any).
func (s *Storage) scanTerms(dummy *termRun, first, next uint64) (*Terms, error) {
	t := &Terms{}
	if dummy != nil {
		off, err := s.p.OrdinalOffset(int64(first))
		if err != nil {
			return nil, err
		}
		dummy.offset = off
		t.runs = append(t.runs, *dummy)
	}
	var buf []byte
	for i := first; i < next; {
		b, n, err := s.p.ReadOrdinals(buf[:0], int64(i), int64(next), 1<<20)
		if err != nil {
			return nil, err
		}
		buf = b
		for ; n > 0; n-- {
			h, err := protocol.ParseBatchHeader(b)
			if err != nil || h.PartitionLeaderEpoch < 0 {
				return nil, fmt.Errorf("%w: entry %d has no term", ErrCorruptLog, i)
			}
			if err := t.Append(uint64(h.PartitionLeaderEpoch), i, h.BaseOffset); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrCorruptLog, err)
			}
			b = b[h.Size():]
			i++
		}
	}
	return t, nil
}

// raiseHighWatermark sets the log's high watermark to the end of entry
// commit (clamped to the log end).
func (s *Storage) raiseHighWatermark(commit uint64) error {
	if commit < uint64(s.p.FirstOrdinal()) {
		return nil
	}
	end := min(int64(commit)+1, s.p.NextOrdinal())
	off, err := s.p.OrdinalOffset(end)
	if err != nil {
		return err
	}
	s.p.SetHighWatermark(off)
	return nil
}

// InitialState is raft's Storage.InitialState: the stored HardState with
// its commit index clamped into [FirstIndex()-1, LastIndex()] (it is
// only as fresh as the last term or vote change, and raft panics on a
// commit past the log), and the ConfState.
func (s *Storage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	conf := s.state.Conf
	if conf == nil {
		conf = &raftpb.ConfState{}
	}
	return proto.Clone(s.state.Hard).(*raftpb.HardState), proto.Clone(conf).(*raftpb.ConfState), s.failed
}

// State returns the stored state (ConfIndex tells the replica where
// applying may start).
func (s *Storage) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return State{Hard: proto.Clone(s.state.Hard).(*raftpb.HardState), Conf: proto.Clone(s.state.Conf).(*raftpb.ConfState), ConfIndex: s.state.ConfIndex}
}

// EndOffsetFor answers OffsetForLeaderEpoch for term from the term
// cache (Terms.EndOffsetFor, with the log end offset for the newest
// term).
func (s *Storage) EndOffsetFor(term uint64) (uint64, int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.terms.EndOffsetFor(term, s.p.LogEndOffset())
}

// FirstIndex is raft's Storage.FirstIndex: the log's first ordinal.
func (s *Storage) FirstIndex() (uint64, error) { return uint64(s.p.FirstOrdinal()), nil }

// LastIndex is raft's Storage.LastIndex: the log's last ordinal.
func (s *Storage) LastIndex() (uint64, error) { return uint64(s.p.NextOrdinal()) - 1, nil }

// Term is raft's Storage.Term, from the term cache.
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first, next := uint64(s.p.FirstOrdinal()), uint64(s.p.NextOrdinal())
	switch {
	case s.failed != nil:
		return 0, s.failed
	case i+1 < first:
		return 0, raft.ErrCompacted
	case i >= next:
		return 0, raft.ErrUnavailable
	}
	t, ok := s.terms.Term(i)
	if !ok {
		if i == 0 {
			return 0, nil // raft's dummy entry before a new log
		}
		return 0, fmt.Errorf("%w: no term for entry %d", ErrCorruptLog, i)
	}
	return t, nil
}

// Entries is raft's Storage.Entries: the batches of [lo, hi) decoded, at
// least one, at most maxSize bytes as raft counts them (the protobuf
// size of each entry). The entries' Data share no memory with the log.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	first, next := uint64(s.p.FirstOrdinal()), uint64(s.p.NextOrdinal())
	if err := s.err(); err != nil {
		return nil, err
	}
	switch {
	case lo < first:
		return nil, raft.ErrCompacted
	case hi > next || lo > hi:
		return nil, fmt.Errorf("%w: entries [%d, %d) of [%d, %d)", raft.ErrUnavailable, lo, hi, first, next)
	case lo == hi:
		return nil, nil
	}
	if ents := s.fromRecent(lo, hi, maxSize); ents != nil {
		return ents, nil
	}
	b, n, err := s.p.ReadOrdinals(nil, int64(lo), int64(hi), int64(min(maxSize, math.MaxInt64)))
	if errors.Is(err, log.ErrOrdinalOutOfRange) {
		return nil, raft.ErrCompacted // retention moved the log start meanwhile
	}
	if err != nil {
		return nil, err
	}
	ents := make([]*raftpb.Entry, 0, n)
	var size uint64
	for i := range uint64(n) {
		h, err := protocol.ParseBatchHeader(b)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrBadEntry, lo+i, err)
		}
		e, err := DecodeEntry(b[:h.Size():h.Size()], lo+i)
		if err != nil {
			return nil, err
		}
		if size += uint64(proto.Size(e)); i > 0 && size > maxSize {
			break
		}
		ents = append(ents, e)
		b = b[h.Size():]
	}
	return ents, nil
}

// fromRecent serves Entries from recent when it holds all of [lo, hi);
// nil otherwise.
func (s *Storage) fromRecent(lo, hi, maxSize uint64) []*raftpb.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lo < s.recentFirst || hi > s.recentFirst+uint64(len(s.recent)) {
		return nil
	}
	src := s.recent[lo-s.recentFirst : hi-s.recentFirst]
	ents := make([]*raftpb.Entry, 0, len(src))
	var size uint64
	for i, e := range src {
		if size += uint64(proto.Size(e)); i > 0 && size > maxSize {
			break
		}
		ents = append(ents, e)
	}
	return ents
}

// keepRecent records entries, just written from index at on, in recent.
func (s *Storage) keepRecent(at uint64, entries []*raftpb.Entry) {
	if end := s.recentFirst + uint64(len(s.recent)); at < s.recentFirst || at > end {
		s.dropRecent(uint64(len(s.recent))) // not contiguous: start over
		s.recentFirst = at
	} else if at < end { // overwritten (a follower's truncated tail)
		for _, e := range s.recent[at-s.recentFirst:] {
			s.recentBytes -= len(e.Data)
		}
		clear(s.recent[at-s.recentFirst:])
		s.recent = s.recent[:at-s.recentFirst]
	}
	for _, e := range entries {
		s.recent = append(s.recent, e)
		s.recentBytes += len(e.Data)
	}
	drop := 0
	for bytes := s.recentBytes; bytes > maxRecentBytes && drop < len(s.recent); drop++ {
		bytes -= len(s.recent[drop].Data)
	}
	s.dropRecent(uint64(drop))
}

// dropRecent forgets recent's first n entries.
func (s *Storage) dropRecent(n uint64) {
	n = min(n, uint64(len(s.recent)))
	for _, e := range s.recent[:n] {
		s.recentBytes -= len(e.Data)
	}
	clear(s.recent[:n])
	s.recent = s.recent[n:]
	s.recentFirst += n
	if len(s.recent) == 0 {
		s.recent = nil // let the array go
	}
}

// Snapshot is raft's Storage.Snapshot. A replica's snapshot is only
// where its log begins: the metadata of entry FirstIndex()-1 (its term
// from the cache, the configuration) and, as Data, the offset of entry
// FirstIndex() (snapshotData). A follower that needs entries retention
// deleted installs it (ApplySnapshot), emptying its log to start there,
// and receives the entries after it. Until the log has been compacted
// there is nothing to snapshot (raft does not ask), and while the
// latest configuration change is past FirstIndex()-1 the configuration
// as of the snapshot is not known: ErrSnapshotTemporarilyUnavailable
// (raft retries later).
func (s *Storage) Snapshot() (*raftpb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return nil, s.failed
	}
	first := uint64(s.p.FirstOrdinal())
	if first <= 1 || s.state.ConfIndex > first-1 {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	term, ok := s.terms.Term(first - 1)
	if !ok {
		return nil, fmt.Errorf("%w: no term for entry %d", ErrCorruptLog, first-1)
	}
	off, err := s.p.OrdinalOffset(int64(first))
	if err != nil {
		return nil, err
	}
	return &raftpb.Snapshot{
		Data: binary.BigEndian.AppendUint64([]byte(snapshotMagic), uint64(off)),
		Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(first - 1), Term: proto.Uint64(term),
			ConfState: proto.Clone(s.state.Conf).(*raftpb.ConfState)},
	}, nil
}

// snapshotMagic starts a snapshot's Data, then the offset of the entry
// after the snapshot (u64, big-endian).
const snapshotMagic = "SHSN"

// ApplySnapshot installs a snapshot the leader sent: the log is emptied
// to start at the snapshot's offset with the entry after it (log's
// ResetTo), the term cache holds only the snapshot's entry, and
// raft.state takes its configuration and commit. The snapshot is first
// written to raft.reset, removed once all of that is durable, so a
// crash in between is finished by Open.
func (s *Storage) ApplySnapshot(snap *raftpb.Snapshot, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	if _, err := snapshotOffset(snap); err != nil {
		return s.fail(err)
	}
	b, err := proto.Marshal(snap)
	if err != nil {
		return s.fail(err)
	}
	if err := writeFileAtomic(s.fs, s.dir, ResetFile, frame(resetMagic, b)); err != nil {
		return s.fail(err)
	}
	if err := s.install(snap, now); err != nil {
		return s.fail(err)
	}
	s.dropRecent(uint64(len(s.recent)))
	return nil
}

// install resets the log, the term cache and raft.state to snap, then
// removes raft.reset.
func (s *Storage) install(snap *raftpb.Snapshot, now time.Time) error {
	md := snap.GetMetadata()
	off, err := snapshotOffset(snap)
	if err != nil {
		return err
	}
	if err := s.p.ResetTo(off, int64(md.GetIndex())+1, now); err != nil {
		return err
	}
	terms := &Terms{runs: []termRun{{term: md.GetTerm(), first: md.GetIndex(), offset: off}}}
	if err := WriteTerms(s.fs, s.dir, terms); err != nil {
		return err
	}
	s.terms = terms
	next := s.state
	next.Conf, next.ConfIndex = proto.Clone(md.GetConfState()).(*raftpb.ConfState), md.GetIndex()
	hard := s.state.Hard
	if hard == nil {
		hard = &raftpb.HardState{}
	}
	next.Hard = proto.Clone(hard).(*raftpb.HardState)
	next.Hard.Commit = proto.Uint64(md.GetIndex())
	if err := WriteState(s.fs, s.dir, next); err != nil {
		return err
	}
	s.state = next
	if err := s.fs.Remove(filepath.Join(s.dir, ResetFile)); err != nil {
		return fmt.Errorf("raftlog: remove %s: %w", ResetFile, err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("raftlog: sync dir %s: %w", s.dir, err)
	}
	return nil
}

// snapshotOffset checks a snapshot and returns the offset its Data
// names.
func snapshotOffset(snap *raftpb.Snapshot) (int64, error) {
	d := snap.GetData()
	if len(d) != len(snapshotMagic)+8 || string(d[:len(snapshotMagic)]) != snapshotMagic || snap.GetMetadata().GetIndex() == 0 {
		return 0, fmt.Errorf("%w: snapshot at %d with %d bytes of data", ErrBadEntry, snap.GetMetadata().GetIndex(), len(d))
	}
	off := int64(binary.BigEndian.Uint64(d[len(snapshotMagic):]))
	if off < 0 {
		return 0, fmt.Errorf("%w: snapshot at offset %d", ErrBadEntry, off)
	}
	return off, nil
}

// ResetFile holds a snapshot being installed (ApplySnapshot).
const ResetFile = "raft.reset"

const resetMagic = "SHRR"

// ErrCorruptReset is a raft.reset that fails its checks.
var ErrCorruptReset = errors.New("raftlog: corrupt raft.reset")

// frame is magic, version 1, three zero bytes, body, CRC-32C of all
// before.
func frame(magic string, body []byte) []byte {
	b := append([]byte(magic), 1, 0, 0, 0)
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// readReset reads dir's raft.reset, if there is one.
func readReset(fsys log.FS, dir string) (*raftpb.Snapshot, bool, error) {
	b, err := readSmallFile(fsys, filepath.Join(dir, ResetFile), 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if errors.Is(err, errTooLarge) {
		return nil, false, fmt.Errorf("%w: %v", ErrCorruptReset, err)
	}
	if err != nil {
		return nil, false, err
	}
	if len(b) < 12 || string(b[:4]) != resetMagic || b[4] != 1 ||
		crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, false, fmt.Errorf("%w: %d bytes", ErrCorruptReset, len(b))
	}
	var snap raftpb.Snapshot
	if err := proto.Unmarshal(b[8:len(b)-4], &snap); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrCorruptReset, err)
	}
	return &snap, true, nil
}

func (s *Storage) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// fail records the first write failure. s.mu held.
func (s *Storage) fail(err error) error {
	if s.failed == nil {
		s.failed = err
	}
	return s.failed
}

// Append writes raft's entries (a MsgStorageAppend's) to the log's page
// cache: entries overwriting the log's tail truncate it first (never
// below the high watermark: raft does not overwrite committed entries),
// the term cache is checkpointed before entries of a new term, or over
// truncated ones, are written (so raft.terms never names a term the log
// does not hold), and the batches then go to the log in one write. The
// caller makes them durable (log.Partition.Sync) before acknowledging
// them to raft. Entries before FirstIndex are skipped, as
// MemoryStorage skips them.
func (s *Storage) Append(entries []*raftpb.Entry, now time.Time) error {
	return s.appendEntries(entries, false, now)
}

// AppendOwn is Append for entries this process made: a raft leader's
// entries of its own term, whose data batches log.Partition.Prepare
// checked (their CRCs are not computed a second time) and whose other
// entries are encoded here.
func (s *Storage) AppendOwn(entries []*raftpb.Entry, now time.Time) error {
	return s.appendEntries(entries, true, now)
}

func (s *Storage) appendEntries(entries []*raftpb.Entry, own bool, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	if err := s.append(entries, own, now); err != nil {
		s.dropRecent(uint64(len(s.recent)))
		return s.fail(err)
	}
	return nil
}

func (s *Storage) append(entries []*raftpb.Entry, own bool, now time.Time) error {
	first, next := uint64(s.p.FirstOrdinal()), uint64(s.p.NextOrdinal())
	for len(entries) > 0 && entries[0].GetIndex() < first {
		entries = entries[1:]
	}
	if len(entries) == 0 {
		return nil
	}
	at := entries[0].GetIndex()
	if at > next {
		return fmt.Errorf("%w: entries from %d after a log ending before %d", ErrBadEntry, at, next)
	}
	dirty := false
	if at < next {
		if err := s.p.TruncateFrom(int64(at)); err != nil {
			return err
		}
		s.terms.TruncateFrom(at)
		dirty = true
	}
	if n := uint64(s.p.FirstOrdinal()); n > 1 && len(s.terms.runs) > 1 && s.terms.runs[1].first <= n-1 {
		s.terms.Compact(n, s.p.LogStartOffset()) // retention moved the log start
		dirty = true
	}
	parts := s.parts[:0]
	offset := s.p.LogEndOffset()
	last := s.terms.Last()
	for k, e := range entries {
		if e.GetIndex() != at+uint64(k) {
			return fmt.Errorf("%w: entry %d after entry %d", ErrBadEntry, e.GetIndex(), at+uint64(k)-1)
		}
		b, err := EncodeEntry(e, offset)
		if err != nil {
			return err
		}
		if err := s.terms.Append(e.GetTerm(), e.GetIndex(), offset); err != nil {
			return err
		}
		if s.terms.Last() != last {
			last, dirty = s.terms.Last(), true
		}
		h, _ := protocol.ParseBatchHeader(b)
		offset = h.LastOffset() + 1
		parts = append(parts, b) // written as they are, not joined
	}
	s.parts = parts[:0] // the scratch keeps what it grew to
	if dirty {
		if err := WriteTerms(s.fs, s.dir, s.terms); err != nil {
			return err
		}
	}
	_, err := s.p.AppendReplicatedBatches(parts, own, now)
	clear(parts) // the scratch must not pin the entries' data
	if err != nil {
		return err
	}
	s.keepRecent(at, entries)
	return nil
}

// SetHardState records raft's HardState. A change of term or vote is
// written to raft.state before SetHardState returns (raft must not send
// a vote or a message of the new term before); a commit index alone is
// kept in memory and written with the next change (SetApplied moves the
// high watermark). An error is final (see WriteState).
func (s *Storage) SetHardState(hs *raftpb.HardState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	cur := s.state.Hard
	if hs.GetTerm() != cur.GetTerm() || hs.GetVote() != cur.GetVote() {
		next := s.state
		next.Hard = proto.Clone(hs).(*raftpb.HardState)
		if err := WriteState(s.fs, s.dir, next); err != nil {
			return s.fail(err)
		}
		s.state = next
	} else {
		s.state.Hard = proto.Clone(hs).(*raftpb.HardState)
	}
	return nil
}

// SetApplied records that raft handed back every committed entry up to
// index (Ready.CommittedEntries, applied), and raises the log's high
// watermark to its end. The high watermark follows the applied index,
// not the commit index raft may know ahead of it: retention deletes only
// below the high watermark, and raft must still be able to read every
// committed entry it has not handed back ("It is the application's
// responsibility to not attempt to compact an index greater than
// raftLog.applied", etcd raft's storage.go).
func (s *Storage) SetApplied(index uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	if err := s.raiseHighWatermark(index); err != nil {
		return s.fail(err)
	}
	if index >= s.recentFirst {
		s.dropRecent(index + 1 - s.recentFirst) // raft has applied them: it reads them no more, but rarely
	}
	return nil
}

// SetConfState records the configuration raft reached by applying the
// change at index, durably.
func (s *Storage) SetConfState(cs *raftpb.ConfState, index uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	next := s.state
	next.Conf, next.ConfIndex = proto.Clone(cs).(*raftpb.ConfState), index
	if err := WriteState(s.fs, s.dir, next); err != nil {
		return s.fail(err)
	}
	s.state = next
	return nil
}

var _ raft.Storage = (*Storage)(nil)
