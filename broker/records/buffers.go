package records

import "sync"

// Buffers pools the buffers fetches and share fetches read records into
// (the root's conn.recordBuf), and the scratch buffers message groups
// classify batches in. Each holds a *[]byte.
var Buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1<<20); return &b }}

// maxPooledBuffer bounds the buffers kept in Buffers.
const maxPooledBuffer = 64 << 20

// PutBuffer gives back to Buffers the buffer bp was taken as, now buf
// (grown from it or not), unless it grew past maxPooledBuffer.
func PutBuffer(bp *[]byte, buf []byte) {
	if cap(buf) <= maxPooledBuffer {
		*bp = buf[:0]
		Buffers.Put(bp)
	}
}
