package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	// ErrFrameTooLarge is returned for a frame whose declared size is
	// above the limit; the connection must be closed.
	ErrFrameTooLarge = errors.New("protocol: frame too large")
	// ErrMalformed is returned for a frame that does not decode.
	ErrMalformed = errors.New("protocol: malformed request")
	// ErrUnknownAPI is returned for an API key kmsg does not know.
	ErrUnknownAPI = errors.New("protocol: unknown api key")
)

// ReadFrame reads one size-prefixed frame. It reuses buf when it is large
// enough and returns the frame body (without the size). A size below the
// smallest possible request header or above limit is refused before any
// allocation; a larger frame than buf holds is allocated as it arrives.
func ReadFrame(r io.Reader, buf []byte, limit int32) ([]byte, error) {
	return readFrame(r, buf, limit, 8)
}

// ReadToken reads one size-prefixed SASL token (after a SaslHandshake
// v0), which may be shorter than a request header, even empty.
func ReadToken(r io.Reader, buf []byte, limit int32) ([]byte, error) {
	return readFrame(r, buf, limit, 0)
}

func readFrame(r io.Reader, buf []byte, limit, minSize int32) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 0 || n > limit {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrFrameTooLarge, n, limit)
	}
	if n < minSize {
		return nil, fmt.Errorf("%w: frame of %d bytes", ErrMalformed, n)
	}
	if int(n) <= cap(buf) {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	// A large frame grows with the bytes that actually arrive (1 MiB, then
	// doubling), so a peer that declares 100 MiB and sends nothing costs
	// us at most 1 MiB.
	buf = buf[:0]
	for len(buf) < int(n) {
		chunk := min(int(n)-len(buf), max(1<<20, len(buf)))
		buf = slices.Grow(buf, chunk)
		if _, err := io.ReadFull(r, buf[len(buf):len(buf)+chunk]); err != nil {
			return nil, err
		}
		buf = buf[:len(buf)+chunk]
	}
	return buf, nil
}

// RequestHeader is the part of a request before its body.
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
}

// PeekHeader reads the fixed part of a request header (key, version,
// correlation id) without decoding anything else. It is used to answer
// requests whose body cannot be decoded, such as an ApiVersions request
// of a version newer than we know.
func PeekHeader(frame []byte) (RequestHeader, error) {
	if len(frame) < 8 {
		return RequestHeader{}, fmt.Errorf("%w: short header", ErrMalformed)
	}
	return RequestHeader{
		Key:           int16(binary.BigEndian.Uint16(frame[0:])),
		Version:       int16(binary.BigEndian.Uint16(frame[2:])),
		CorrelationID: int32(binary.BigEndian.Uint32(frame[4:])),
	}, nil
}

// ParseRequest decodes a whole request frame (without its size prefix).
// The returned request has its version set. Its byte fields (record
// batches, group metadata and assignments) alias frame: a caller that
// reuses frame for the next request must copy any bytes it keeps.
func ParseRequest(frame []byte) (RequestHeader, kmsg.Request, error) {
	h, err := PeekHeader(frame)
	if err != nil {
		return h, nil, err
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, fmt.Errorf("%w: %d", ErrUnknownAPI, h.Key)
	}
	if h.Version < 0 || h.Version > req.MaxVersion() {
		return h, nil, fmt.Errorf("%w: %s v%d is newer than we can decode", ErrMalformed, kmsg.NameForKey(h.Key), h.Version)
	}
	req.SetVersion(h.Version)
	rest := frame[8:]
	// Header v1+: nullable client id as int16 length + bytes.
	if len(rest) < 2 {
		return h, nil, fmt.Errorf("%w: short client id", ErrMalformed)
	}
	l := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if l > 0 {
		if int(l) > len(rest) {
			return h, nil, fmt.Errorf("%w: client id length %d", ErrMalformed, l)
		}
		h.ClientID = string(rest[:l])
		rest = rest[l:]
	} else if l < -1 {
		return h, nil, fmt.Errorf("%w: client id length %d", ErrMalformed, l)
	}
	// Header v2 (flexible requests) adds tagged fields; ApiVersions is
	// always sent with header v2 from its flexible version on too.
	if req.IsFlexible() {
		rest, err = skipTags(rest)
		if err != nil {
			return h, nil, err
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return h, nil, fmt.Errorf("%w: %s v%d: %v", ErrMalformed, kmsg.NameForKey(h.Key), h.Version, err)
	}
	return h, req, nil
}

// skipTags skips a tagged-field section: uvarint count, then for each
// field uvarint tag, uvarint size, size bytes.
func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, fmt.Errorf("%w: bad tag count", ErrMalformed)
	}
	b = b[w:]
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: tag count %d", ErrMalformed, n)
	}
	for i := uint64(0); i < n; i++ {
		_, w = binary.Uvarint(b)
		if w <= 0 {
			return nil, fmt.Errorf("%w: bad tag", ErrMalformed)
		}
		b = b[w:]
		sz, w := binary.Uvarint(b)
		if w <= 0 || sz > uint64(len(b)-w) {
			return nil, fmt.Errorf("%w: bad tag size", ErrMalformed)
		}
		b = b[w+int(sz):]
	}
	return b, nil
}

// AppendResponse appends a whole response frame (size prefix included)
// for the given correlation id. Flexible responses carry an empty tagged
// field section in their header, except ApiVersions, whose response
// header is always v0 so that clients can parse it before they know our
// versions.
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
