package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/shoal-mq/shoal/log"
)

// TermsFile is the name of the term cache's checkpoint in a replica's
// directory.
const TermsFile = "raft.terms"

// termRun says that the entries from ordinal first on, starting at
// Kafka offset offset, have term term, up to the next run.
type termRun struct {
	term, first uint64
	offset      int64
}

// Terms is the term cache: raft's Term(i) for every entry of the log
// without reading it, as runs of one term each (term, first ordinal,
// first offset), Kafka's leader-epoch cache in raft's words. Terms only
// grow along the log; a run is added when an entry of a newer term is
// appended, dropped when the log is truncated below it, and the runs
// wholly below the log's first entry but the last one are forgotten by
// Compact (raft asks Term(FirstIndex()-1)).
//
// It is not safe for concurrent use: the replica's raft goroutine owns
// it.
type Terms struct {
	runs []termRun
}

// ErrTermOrder is an entry whose term or position contradicts the
// cache: raft handed the storage something the log cannot hold.
var ErrTermOrder = errors.New("raftlog: entry out of term order")

// Append records that the entry at ordinal i, starting at offset, has
// term. Entries come in log order: i is after every recorded run's
// first entry, offset not before its offset, and term at least the last
// run's. (The offset may equal it: after Compact the first run's offset
// is the log start, where the log's first entry, after the run's first,
// begins.)
func (t *Terms) Append(term, i uint64, offset int64) error {
	if n := len(t.runs); n > 0 {
		last := t.runs[n-1]
		switch {
		case i <= last.first || offset < last.offset:
			return fmt.Errorf("%w: entry %d at offset %d after the run of term %d from entry %d at offset %d",
				ErrTermOrder, i, offset, last.term, last.first, last.offset)
		case term < last.term:
			return fmt.Errorf("%w: entry %d of term %d after term %d", ErrTermOrder, i, term, last.term)
		case term == last.term:
			return nil
		}
	}
	t.runs = append(t.runs, termRun{term: term, first: i, offset: offset})
	return nil
}

// Term is the term of entry i, ok false when i is before the first run.
// The caller knows the log's bounds: it answers ErrCompacted below
// FirstIndex()-1 and ErrUnavailable past LastIndex() itself.
func (t *Terms) Term(i uint64) (term uint64, ok bool) {
	k := sort.Search(len(t.runs), func(k int) bool { return t.runs[k].first > i }) - 1
	if k < 0 {
		return 0, false
	}
	return t.runs[k].term, true
}

// Last is the newest term, 0 for none.
func (t *Terms) Last() uint64 {
	if len(t.runs) == 0 {
		return 0
	}
	return t.runs[len(t.runs)-1].term
}

// TruncateFrom forgets entries i and after (the log lost them: raft
// overwrote them, or recovery cut a torn tail). Before entries are
// written over the truncated ones, the caller checkpoints the cache
// durably (WriteTerms): a checkpoint a crash leaves must never name a
// term the log no longer holds, since Term answers from it.
func (t *Terms) TruncateFrom(i uint64) {
	k := sort.Search(len(t.runs), func(k int) bool { return t.runs[k].first >= i })
	t.runs = t.runs[:k]
}

// Compact forgets the entries below i-1, the log's first entry now
// being i and its log start offset logStart: the runs wholly below go,
// and the run covering i-1 (raft still asks Term(FirstIndex()-1)) now
// starts there, at logStart, as Kafka's leader-epoch cache moves its
// first entry up to the log start (truncateFromStart).
func (t *Terms) Compact(i uint64, logStart int64) {
	if i == 0 {
		return
	}
	k := sort.Search(len(t.runs), func(k int) bool { return t.runs[k].first > i-1 }) - 1
	if k < 0 {
		return
	}
	t.runs = append(t.runs[:0], t.runs[k:]...)
	t.runs[0].first = i - 1
	bound := int64(math.MaxInt64) // offsets never go back from run to run
	if len(t.runs) > 1 {
		bound = t.runs[1].offset
	}
	t.runs[0].offset = max(t.runs[0].offset, min(logStart, bound))
}

// EndOffsetFor answers OffsetForLeaderEpoch for term, as Kafka's
// leader-epoch cache does (LeaderEpochFileCache.endOffsetFor): for the
// newest term, the log end offset leo; for an older one, the largest
// known term not above it and the first offset of the next newer term;
// for a term older than every run, that term itself and the first run's
// offset. ok is false for a term newer than every run, or an empty
// cache: Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET (-1, -1),
// which the caller answers.
func (t *Terms) EndOffsetFor(term uint64, leo int64) (_ uint64, _ int64, ok bool) {
	n := len(t.runs)
	if n == 0 {
		return 0, -1, false
	}
	if t.runs[n-1].term == term {
		return term, leo, true
	}
	higher := sort.Search(n, func(k int) bool { return t.runs[k].term > term })
	if higher == n {
		return 0, -1, false
	}
	if higher == 0 {
		return term, t.runs[0].offset, true
	}
	return t.runs[higher-1].term, t.runs[higher].offset, true
}

const (
	termsMagic   = "SHRT"
	termsVersion = 1
	termRunSize  = 24
	// maxTermRuns bounds the count a checkpoint may claim: a term per
	// election, far more than any log sees between compactions.
	maxTermRuns = 1 << 20
)

// ErrCorruptTerms is a raft.terms that fails its checks; the replica
// rebuilds the cache from the batches' terms instead.
var ErrCorruptTerms = errors.New("raftlog: corrupt raft.terms")

// raft.terms:
//
//	offset size field
//	     0    4 magic "SHRT"
//	     4    1 version (1)
//	     5    3 reserved, zero
//	     8    4 run count n
//	    12 n*24 runs: term u64, first entry u64, first offset i64
//	 12+24n   4 CRC-32C of every byte before it
func (t *Terms) encode() []byte {
	b := make([]byte, 0, 12+termRunSize*len(t.runs)+4)
	b = append(b, termsMagic...)
	b = append(b, termsVersion, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(t.runs)))
	for _, r := range t.runs {
		b = binary.BigEndian.AppendUint64(b, r.term)
		b = binary.BigEndian.AppendUint64(b, r.first)
		b = binary.BigEndian.AppendUint64(b, uint64(r.offset))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeTerms(b []byte) (*Terms, error) {
	if len(b) < 16 {
		return nil, fmt.Errorf("%d bytes", len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, errors.New("crc mismatch")
	}
	if string(body[:4]) != termsMagic || body[4] != termsVersion || body[5]|body[6]|body[7] != 0 {
		return nil, fmt.Errorf("header % x", body[:8])
	}
	n := binary.BigEndian.Uint32(body[8:])
	if n > maxTermRuns || int64(len(body)-12) != int64(n)*termRunSize {
		return nil, fmt.Errorf("%d runs in %d bytes", n, len(body)-12)
	}
	t := &Terms{}
	for p := body[12:]; len(p) > 0; p = p[termRunSize:] {
		term, first := binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])
		offset := int64(binary.BigEndian.Uint64(p[16:]))
		if offset < 0 {
			return nil, fmt.Errorf("run of term %d at offset %d", term, offset)
		}
		if err := t.Append(term, first, offset); err != nil || t.Last() != term {
			return nil, fmt.Errorf("runs out of order at term %d entry %d", term, first)
		}
	}
	return t, nil
}

// ReadTerms reads dir's term checkpoint; found is false when there is
// none, and a file that fails its checks is ErrCorruptTerms.
func ReadTerms(fsys log.FS, dir string) (t *Terms, found bool, err error) {
	b, err := readSmallFile(fsys, filepath.Join(dir, TermsFile), 12+termRunSize*maxTermRuns+4)
	if errors.Is(err, fs.ErrNotExist) {
		return &Terms{}, false, nil
	}
	if errors.Is(err, errTooLarge) {
		return nil, false, fmt.Errorf("%w: %v", ErrCorruptTerms, err)
	}
	if err != nil {
		return nil, false, err
	}
	if t, err = decodeTerms(b); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrCorruptTerms, err)
	}
	return t, true, nil
}

// WriteTerms replaces dir's term checkpoint with t, durably (as
// WriteState).
func WriteTerms(fsys log.FS, dir string, t *Terms) error {
	return writeFileAtomic(fsys, dir, TermsFile, t.encode())
}

// errTooLarge is a file larger than any valid one: corrupt.
var errTooLarge = errors.New("larger than any valid file")

// readSmallFile reads a whole file of at most limit bytes.
func readSmallFile(fsys log.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("raftlog: open %s: %w", name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("raftlog: size of %s: %w", name, err)
	}
	if size > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes", errTooLarge, name, size)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, fmt.Errorf("raftlog: read %s: %w", name, err)
	}
	return b, nil
}

// writeFileAtomic replaces dir/name with data, durably: the log's atomic
// write, then the directory's fsync.
func writeFileAtomic(fsys log.FS, dir, name string, data []byte) error {
	if err := log.WriteFileAtomic(fsys, filepath.Join(dir, name), data); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("raftlog: sync dir %s: %w", dir, err)
	}
	return nil
}
