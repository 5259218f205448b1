package protocol

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCRC32CCombine: the CRC of A followed by B from the CRCs of A and B
// and B's length matches the CRC computed over A and B, for lengths from
// 0 to past a megabyte; and the combination run backwards gives B's CRC
// from A's and AB's.
func TestCRC32CCombine(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(1))
	buf := make([]byte, 3<<20)
	rng.Read(buf)
	lens := []int{0, 1, 2, 3, 7, 8, 61, 1000, 1024, 4095, 65536, 1 << 20, 3<<20 - 5}
	for _, la := range lens {
		for _, lb := range lens {
			if la+lb > len(buf) {
				continue
			}
			a, b := buf[:la], buf[la:la+lb]
			ca, cb, cab := CRC32C(0, a), CRC32C(0, b), CRC32C(0, buf[:la+lb])
			require.Equal(t, cab, CRC32CCombine(ca, cb, int64(lb)), "la=%d lb=%d", la, lb)
			require.Equal(t, cb, CRC32CCombine(ca, cab, int64(lb)), "la=%d lb=%d", la, lb)
			require.Equal(t, cab, CRC32C(ca, b), "la=%d lb=%d", la, lb)
		}
	}
	for range 200 {
		la, lb := rng.Intn(5000), rng.Intn(5000)
		a, b := buf[:la], buf[la:la+lb]
		require.Equal(t, CRC32C(0, buf[:la+lb]), CRC32CCombine(CRC32C(0, a), CRC32C(0, b), int64(lb)))
	}
}

// BenchmarkCRC32CCombine: one combination past a 150 KiB stretch, what a
// trimmed batch costs per kept stretch instead of reading the stretch.
func BenchmarkCRC32CCombine(b *testing.B) {
	var c uint32
	for i := range b.N {
		c = CRC32CCombine(c, uint32(i), 150<<10)
	}
	_ = c
}
