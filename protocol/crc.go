package protocol

import (
	"encoding/binary"
	"hash/crc32"
)

// CRC-32C arithmetic for batches whose CRC is derived rather than
// recomputed: a batch trimmed to some of its records gets its CRC from
// the running CRCs of the original batch at the kept records' bounds
// (computed while the original's CRC was verified) and the kept stretches'
// lengths, without reading the kept bytes again (CRC32CCombine).

// BatchCRCFrom is where a batch's CRC coverage starts: its attributes.
const BatchCRCFrom = offAttributes

// CRC32C extends crc, the CRC-32C (Castagnoli) of some bytes, by p, as
// crc32.Update does; CRC32C(0, p) is the CRC of p alone.
func CRC32C(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// PutBatchCRC stores crc as the CRC of the batch at the start of b.
func PutBatchCRC(b []byte, crc uint32) { binary.BigEndian.PutUint32(b[offCRC:], crc) }

// crc32cPoly is the Castagnoli polynomial, bit-reflected as crc32 uses it.
const crc32cPoly = 0x82f63b78

// crc32cX2n[k] is x^(2^k) modulo the polynomial, bit-reflected (x^0 is
// 1<<31): squares of one another, so any power of x is a product of them.
var crc32cX2n = func() (t [64]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = crc32cMul(t[k-1], t[k-1])
	}
	return t
}()

// crc32cMul multiplies a and b modulo the polynomial (bit-reflected).
func crc32cMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a &^= m
		}
		if b&1 != 0 {
			b = b>>1 ^ crc32cPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// CRC32CCombine returns the CRC-32C of A followed by B from crcA, the CRC
// of A, crcB, the CRC of B, and n, the length of B (>= 0): crcA shifted
// past n bytes (multiplied by x^(8n)), xor crcB. It costs a
// multiplication per set bit of n, about a microsecond for a megabyte,
// whatever A's length. Being linear, it also gives the CRC of B alone
// from the CRCs of A and of A followed by B: CRC32CCombine(crcA, crcAB, n)
// is crcB. n must be below 2^60 (the table's powers of x).
func CRC32CCombine(crcA, crcB uint32, n int64) uint32 {
	if n < 0 || n >= 1<<60 {
		panic("protocol: CRC32CCombine length out of range") // programming error
	}
	x := uint32(1) << 31 // x^0
	k := 3               // bytes: x^(8n) = x^(n * 2^3)
	for u := uint64(n); u != 0; u >>= 1 {
		if u&1 != 0 {
			x = crc32cMul(crc32cX2n[k], x)
		}
		k++
	}
	return crc32cMul(x, crcA) ^ crcB
}
