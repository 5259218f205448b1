package records

import (
	"encoding/binary"

	"github.com/shoal-mq/shoal/protocol"
)

// AppendRewritten appends batch rewritten to hold only the wire records
// keep (with their original offset and timestamp deltas), uncompressed.
func AppendRewritten(dst, batch []byte, keep [][]byte) []byte {
	at := len(dst)
	dst = append(dst, batch[:protocol.BatchHeaderSize]...)
	for _, r := range keep {
		dst = append(dst, r...)
	}
	FinishRewritten(dst[at:], len(keep))
	return dst
}

// FinishRewritten fixes the header of b, a batch header followed by n of
// its records' wire bytes (uncompressed): length, attributes (no
// compression), record count (PatchRewritten) and CRC.
func FinishRewritten(b []byte, n int) {
	PatchRewritten(b, n)
	protocol.SetBatchCRC(b)
}

// PatchRewritten is FinishRewritten but for the CRC.
func PatchRewritten(b []byte, n int) {
	be := binary.BigEndian
	be.PutUint32(b[8:], uint32(len(b)-protocol.BatchLengthPrefix))
	be.PutUint16(b[21:], be.Uint16(b[21:])&^uint16(protocol.AttrCompressionMask)) // attributes
	be.PutUint32(b[57:], uint32(n))                                               // record count
}
