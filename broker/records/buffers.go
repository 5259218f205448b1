package records

import "sync"

// buffers pools the buffers fetches and share fetches read records into
// (the root's conn.recordBuf), and the scratch buffers message groups
// classify batches in. Each holds a *[]byte.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1<<20); return &b }}

// maxPooledBuffer bounds the buffers kept in the pool.
const maxPooledBuffer = 64 << 20

// GetBuffer takes a buffer from the pool (1 MiB of capacity when new);
// PutBuffer gives it back.
func GetBuffer() *[]byte { return buffers.Get().(*[]byte) }

// PutBuffer gives back to the pool the buffer bp was taken as, now buf
// (grown from it or not), unless it grew past maxPooledBuffer.
func PutBuffer(bp *[]byte, buf []byte) {
	if cap(buf) <= maxPooledBuffer {
		*bp = buf[:0]
		buffers.Put(bp)
	}
}
