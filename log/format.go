package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strconv"
	"strings"
)

// File names and on-disk frames defined by this package. The byte layouts
// are drawn in doc.go; every frame carries a magic, a version byte and a
// CRC-32C.

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	snapshotSuffix  = ".snapshot"
	tmpSuffix       = ".tmp"
	checkpointName  = "partition.checkpoint"

	formatVersion = 1

	// Segment index files: an 84-byte header, then fixed-size entries.
	// Version 2 added the base ordinal and batch count to the header and
	// the relative ordinal to offset index entries; version 1 files are
	// rebuilt from their segment.
	indexVersion     = 2
	indexHeaderSize  = 84
	offsetEntrySize  = 12 // relOffset uint32, position uint32, relOrdinal uint32
	timeEntrySize    = 12 // timestamp int64, relOffset uint32
	offsetIndexMagic = "SHOI"
	timeIndexMagic   = "SHTI"
	checkpointMagic  = "SHCP"
	// Checkpoint version 2 added the first segment's base offset and base ordinal;
	// version 1 (28 bytes) is still read.
	checkpointVersion  = 2
	checkpointSize     = 44
	checkpointV1Size   = 28
	snapshotMagic      = "SHPS"
	snapshotHeaderSize = 20 // magic, version, 3 reserved, offset int64, count uint32
	snapshotEntrySize  = 8 + 2 + 8 + 4 + 8 + 1 + maxProducerBatches*batchMetaSize
	batchMetaSize      = 4 + 4 + 8 + 8
	// snapshotVersion 2 adds the aborted-transactions section; version 1
	// (formatVersion) snapshots are still read.
	snapshotVersion  = 2
	abortedEntrySize = 8 + 8 + 8 // producer id, first offset, marker offset
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, crcTable) }

func fileName(dir string, off int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", off, suffix))
}

// parseFileName returns the offset of a "<20 digits><suffix>" name.
func parseFileName(name, suffix string) (int64, bool) {
	s, ok := strings.CutSuffix(name, suffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	off, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return off, true
}

// segmentMeta is what a sealed segment's index header records about it.
type segmentMeta struct {
	base       int64 // offset of the first batch
	next       int64 // offset after the last batch
	logSize    int64 // bytes of the .log file the index describes
	maxTs      int64 // largest batch maxTimestamp; -1 when empty
	maxTsBase  int64 // base offset of the first batch with maxTs; -1 when empty
	firstTs    int64 // maxTimestamp of the first batch (segment.ms roll base); -1 when empty
	baseOrd    int64 // ordinal of the first batch
	count      int64 // batches in the segment
	entries    uint32
	entriesCRC uint32
}

// encodeIndexHeader writes the 84-byte header into b.
func encodeIndexHeader(b []byte, magic string, m segmentMeta) {
	be := binary.BigEndian
	copy(b[0:4], magic)
	b[4] = indexVersion
	b[5], b[6], b[7] = 0, 0, 0
	be.PutUint64(b[8:], uint64(m.base))
	be.PutUint64(b[16:], uint64(m.next))
	be.PutUint64(b[24:], uint64(m.logSize))
	be.PutUint64(b[32:], uint64(m.maxTs))
	be.PutUint64(b[40:], uint64(m.maxTsBase))
	be.PutUint64(b[48:], uint64(m.firstTs))
	be.PutUint64(b[56:], uint64(m.baseOrd))
	be.PutUint64(b[64:], uint64(m.count))
	be.PutUint32(b[72:], m.entries)
	be.PutUint32(b[76:], m.entriesCRC)
	be.PutUint32(b[80:], crc(b[:80]))
}

// decodeIndexHeader checks magic, version and header CRC.
func decodeIndexHeader(b []byte, magic string) (segmentMeta, bool) {
	if len(b) < indexHeaderSize || string(b[0:4]) != magic || b[4] != indexVersion {
		return segmentMeta{}, false
	}
	be := binary.BigEndian
	if crc(b[:80]) != be.Uint32(b[80:]) {
		return segmentMeta{}, false
	}
	m := segmentMeta{
		base:       int64(be.Uint64(b[8:])),
		next:       int64(be.Uint64(b[16:])),
		logSize:    int64(be.Uint64(b[24:])),
		maxTs:      int64(be.Uint64(b[32:])),
		maxTsBase:  int64(be.Uint64(b[40:])),
		firstTs:    int64(be.Uint64(b[48:])),
		baseOrd:    int64(be.Uint64(b[56:])),
		count:      int64(be.Uint64(b[64:])),
		entries:    be.Uint32(b[72:]),
		entriesCRC: be.Uint32(b[76:]),
	}
	if m.baseOrd < 0 || m.count < 0 || m.count > m.next-m.base {
		return segmentMeta{}, false
	}
	return m, true
}

// checkpoint is the partition checkpoint file's content.
type checkpoint struct {
	logStart      int64
	recoveryPoint int64
	// firstBase and firstOrd are the first segment's base offset and
	// base ordinal; -1 when unknown (a version 1 file). Segments below
	// firstBase are an interrupted deletion.
	firstBase, firstOrd int64
}

func encodeCheckpoint(c checkpoint) []byte {
	b := make([]byte, checkpointSize)
	be := binary.BigEndian
	copy(b[0:4], checkpointMagic)
	b[4] = checkpointVersion
	be.PutUint64(b[8:], uint64(c.logStart))
	be.PutUint64(b[16:], uint64(c.recoveryPoint))
	be.PutUint64(b[24:], uint64(c.firstBase))
	be.PutUint64(b[32:], uint64(c.firstOrd))
	be.PutUint32(b[40:], crc(b[:40]))
	return b
}

func decodeCheckpoint(b []byte) (checkpoint, bool) {
	if len(b) < checkpointV1Size || string(b[0:4]) != checkpointMagic {
		return checkpoint{}, false
	}
	be := binary.BigEndian
	c := checkpoint{logStart: int64(be.Uint64(b[8:])), recoveryPoint: int64(be.Uint64(b[16:])), firstBase: -1, firstOrd: -1}
	switch {
	case b[4] == formatVersion && len(b) == checkpointV1Size:
		if crc(b[:24]) != be.Uint32(b[24:]) {
			return checkpoint{}, false
		}
	case b[4] == checkpointVersion && len(b) == checkpointSize:
		if crc(b[:40]) != be.Uint32(b[40:]) {
			return checkpoint{}, false
		}
		c.firstBase, c.firstOrd = int64(be.Uint64(b[24:])), int64(be.Uint64(b[32:]))
		if c.firstBase < 0 || c.firstOrd < 0 || c.firstBase > c.logStart {
			return checkpoint{}, false
		}
	default:
		return checkpoint{}, false
	}
	if c.logStart < 0 || c.recoveryPoint < 0 {
		return checkpoint{}, false
	}
	return c, true
}

// encodeSnapshot encodes the producer state as of offset (all batches
// below offset applied). Entries are written in producer id order.
func encodeSnapshot(offset int64, producers []producerEntry, aborted []AbortedTxn) []byte {
	b := make([]byte, snapshotHeaderSize+len(producers)*snapshotEntrySize+4+len(aborted)*abortedEntrySize+4)
	be := binary.BigEndian
	copy(b[0:4], snapshotMagic)
	b[4] = snapshotVersion
	be.PutUint64(b[8:], uint64(offset))
	be.PutUint32(b[16:], uint32(len(producers)))
	p := b[snapshotHeaderSize:]
	for i := range producers {
		e := &producers[i]
		be.PutUint64(p[0:], uint64(e.id))
		be.PutUint16(p[8:], uint16(e.epoch))
		be.PutUint64(p[10:], uint64(e.lastTs))
		be.PutUint32(p[18:], uint32(e.coordinatorEpoch))
		be.PutUint64(p[22:], uint64(e.txnStart))
		p[30] = byte(e.n)
		q := p[31:]
		for j := range maxProducerBatches {
			m := e.batches[j]
			be.PutUint32(q[0:], uint32(m.firstSeq))
			be.PutUint32(q[4:], uint32(m.lastSeq))
			be.PutUint64(q[8:], uint64(m.baseOffset))
			be.PutUint64(q[16:], uint64(m.lastOffset))
			q = q[batchMetaSize:]
		}
		p = p[snapshotEntrySize:]
	}
	be.PutUint32(p, uint32(len(aborted)))
	p = p[4:]
	for _, a := range aborted {
		be.PutUint64(p[0:], uint64(a.ProducerID))
		be.PutUint64(p[8:], uint64(a.FirstOffset))
		be.PutUint64(p[16:], uint64(a.LastOffset))
		p = p[abortedEntrySize:]
	}
	be.PutUint32(p, crc(b[:len(b)-4]))
	return b
}

// decodeSnapshot checks the frame and returns the offset, the producer
// entries and the aborted transactions. Version 1 snapshots (before
// transactions) have no aborted section.
func decodeSnapshot(b []byte) (int64, []producerEntry, []AbortedTxn, bool) {
	if len(b) < snapshotHeaderSize+4 || string(b[0:4]) != snapshotMagic || (b[4] != formatVersion && b[4] != snapshotVersion) {
		return 0, nil, nil, false
	}
	be := binary.BigEndian
	if crc(b[:len(b)-4]) != be.Uint32(b[len(b)-4:]) {
		return 0, nil, nil, false
	}
	offset := int64(be.Uint64(b[8:]))
	count := be.Uint32(b[16:])
	body := uint64(snapshotHeaderSize) + uint64(count)*snapshotEntrySize
	var aborted []AbortedTxn
	switch {
	case offset < 0:
		return 0, nil, nil, false
	case b[4] == formatVersion:
		if uint64(len(b)) != body+4 {
			return 0, nil, nil, false
		}
	default:
		if uint64(len(b)) < body+8 {
			return 0, nil, nil, false
		}
		n := uint64(be.Uint32(b[body:]))
		if uint64(len(b)) != body+8+n*abortedEntrySize {
			return 0, nil, nil, false
		}
		q := b[body+4:]
		aborted = make([]AbortedTxn, n)
		for i := range aborted {
			aborted[i] = AbortedTxn{ProducerID: int64(be.Uint64(q[0:])), FirstOffset: int64(be.Uint64(q[8:])), LastOffset: int64(be.Uint64(q[16:]))}
			q = q[abortedEntrySize:]
		}
	}
	out := make([]producerEntry, count)
	p := b[snapshotHeaderSize:]
	for i := range out {
		e := &out[i]
		e.id = int64(be.Uint64(p[0:]))
		e.epoch = int16(be.Uint16(p[8:]))
		e.lastTs = int64(be.Uint64(p[10:]))
		e.coordinatorEpoch = int32(be.Uint32(p[18:]))
		e.txnStart = int64(be.Uint64(p[22:]))
		e.n = int(p[30])
		if e.n > maxProducerBatches {
			return 0, nil, nil, false
		}
		q := p[31:]
		for j := range maxProducerBatches {
			e.batches[j] = batchMeta{
				firstSeq:   int32(be.Uint32(q[0:])),
				lastSeq:    int32(be.Uint32(q[4:])),
				baseOffset: int64(be.Uint64(q[8:])),
				lastOffset: int64(be.Uint64(q[16:])),
			}
			q = q[batchMetaSize:]
		}
		p = p[snapshotEntrySize:]
	}
	return offset, out, aborted, true
}
