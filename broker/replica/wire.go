package replica

import (
	"bytes"
	"errors"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The wire form of a raft message is raftpb.Message's protobuf
// encoding, built and read here without copying entry data: a leader's
// appends carry record batches (a megabyte each, often), and every copy
// of them costs memory bandwidth the three replicas of a partition on
// one machine share. Protobuf lets fields come in any order and a
// repeated field's elements anywhere, so the encoding is the message
// without its entries, then each entry as field 7 whose Data bytes are
// the entry's own slice; the receiver decodes entries itself with Data
// pointing into the frame it received, and the rest with proto.

// Field numbers of raftpb.Message and raftpb.Entry.
const (
	fieldMessageEntries = 7
	fieldEntryType      = 1
	fieldEntryTerm      = 2
	fieldEntryIndex     = 3
	fieldEntryData      = 4
)

// inlineData is the entry size below which an entry's data is copied
// into the encoding rather than sent as a part of its own.
const inlineData = 4 << 10

// encode returns m's wire form in parts (concatenated, they are one
// valid protobuf encoding of m).
func encode(m *raftpb.Message) ([][]byte, error) {
	big := false
	for _, e := range m.Entries {
		if len(e.Data) >= inlineData {
			big = true
			break
		}
	}
	if !big {
		b, err := proto.Marshal(m)
		return [][]byte{b}, err
	}
	ents := m.Entries
	m.Entries = nil
	head, err := proto.Marshal(m)
	m.Entries = ents
	if err != nil {
		return nil, err
	}
	parts := make([][]byte, 0, 2*len(ents)+1)
	cur := head
	for _, e := range ents {
		var fields []byte
		if e.Type != nil {
			fields = protowire.AppendTag(fields, fieldEntryType, protowire.VarintType)
			fields = protowire.AppendVarint(fields, uint64(*e.Type))
		}
		if e.Term != nil {
			fields = protowire.AppendTag(fields, fieldEntryTerm, protowire.VarintType)
			fields = protowire.AppendVarint(fields, *e.Term)
		}
		if e.Index != nil {
			fields = protowire.AppendTag(fields, fieldEntryIndex, protowire.VarintType)
			fields = protowire.AppendVarint(fields, *e.Index)
		}
		if e.Data != nil {
			fields = protowire.AppendTag(fields, fieldEntryData, protowire.BytesType)
			fields = protowire.AppendVarint(fields, uint64(len(e.Data)))
		}
		size := len(fields) + len(e.Data)
		cur = protowire.AppendTag(cur, fieldMessageEntries, protowire.BytesType)
		cur = protowire.AppendVarint(cur, uint64(size))
		cur = append(cur, fields...)
		if len(e.Data) < inlineData {
			cur = append(cur, e.Data...)
			continue
		}
		parts = append(parts, cur, e.Data)
		cur = nil
	}
	if len(cur) > 0 {
		parts = append(parts, cur)
	}
	return parts, nil
}

var errWire = errors.New("malformed raft message")

// decode parses a wire form into m; the entries' Data alias data,
// which the caller must not change afterwards.
func decode(data []byte, m *raftpb.Message) error {
	var rest []byte // every field but the entries, for proto
	var ents []*raftpb.Entry
	for b := data; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errWire
		}
		fn := protowire.ConsumeFieldValue(num, typ, b[n:])
		if fn < 0 {
			return errWire
		}
		field := b[:n+fn]
		b = b[n+fn:]
		if num != fieldMessageEntries {
			rest = append(rest, field...)
			continue
		}
		if typ != protowire.BytesType {
			return errWire
		}
		v, _ := protowire.ConsumeBytes(field[n:])
		e, err := decodeEntry(v)
		if err != nil {
			return err
		}
		ents = append(ents, e)
	}
	if err := proto.Unmarshal(rest, m); err != nil {
		return err
	}
	m.Entries = ents
	return nil
}

// decodeEntry decodes an Entry with Data aliasing b; one with a field
// it does not know (a newer raftpb) is left to proto, copying.
func decodeEntry(b []byte) (*raftpb.Entry, error) {
	e := &raftpb.Entry{}
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return nil, errWire
		}
		rest = rest[n:]
		switch {
		case typ == protowire.VarintType && (num == fieldEntryType || num == fieldEntryTerm || num == fieldEntryIndex):
			v, n := protowire.ConsumeVarint(rest)
			if n < 0 {
				return nil, errWire
			}
			rest = rest[n:]
			switch num {
			case fieldEntryType:
				t := raftpb.EntryType(int32(v))
				e.Type = &t
			case fieldEntryTerm:
				e.Term = &v
			default:
				e.Index = &v
			}
		case typ == protowire.BytesType && num == fieldEntryData:
			v, n := protowire.ConsumeBytes(rest)
			if n < 0 {
				return nil, errWire
			}
			rest = rest[n:]
			e.Data = v[:len(v):len(v)]
		default:
			e = &raftpb.Entry{}
			if err := proto.Unmarshal(b, e); err != nil {
				return nil, err
			}
			return e, nil
		}
	}
	return e, nil
}

// Bytes returns the message's wire form in one slice.
func (m Message) Bytes() []byte { return bytes.Join(m.Parts, nil) }
