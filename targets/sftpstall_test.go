package targets

import (
	"encoding/binary"
	"testing"
)

// TestFrameCounter: packets are counted however the stream is cut.
func TestFrameCounter(t *testing.T) {
	var stream []byte
	for _, size := range []int{5, 0, 1, 40000, 13} {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(size))
		stream = append(stream, hdr[:]...)
		stream = append(stream, make([]byte, size)...)
	}
	for _, cut := range []int{1, 2, 3, 7, 4096, len(stream)} {
		var f frameCounter
		for i := 0; i < len(stream); i += cut {
			f.feed(stream[i:min(i+cut, len(stream))])
		}
		if f.packets != 5 || f.left != 0 || f.have != 0 {
			t.Errorf("cut %d: %d packets (left %d, have %d), want 5", cut, f.packets, f.left, f.have)
		}
	}
}
