package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoal-mq/shoal/log"
)

// StateFile is the name of the state file in a replica's directory.
const StateFile = "raft.state"

const (
	stateMagic   = "SHRS"
	stateVersion = 1
	stateHeader  = 8
	// maxStatePart bounds a part's length field, so that a corrupt one
	// is refused before anything is allocated for it (a ConfState of
	// any real cluster is a few hundred bytes).
	maxStatePart = 1 << 20
)

// ErrCorruptState is a raft.state that fails its checks (magic, version,
// lengths, CRC, protobuf). The replica must not start from it.
var ErrCorruptState = errors.New("raftlog: corrupt raft.state")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// State is what a replica persists outside its log.
//
// Hard.Commit is only as fresh as the last write (the state is written
// when the term or the vote changes): the caller clamps it into
// [FirstIndex()-1, LastIndex()] before handing it to raft, which panics
// otherwise, and starts applying no lower than ConfIndex.
type State struct {
	Hard *raftpb.HardState
	Conf *raftpb.ConfState
	// ConfIndex is the index of the entry whose apply produced Conf (0:
	// the bootstrap configuration): entries up to it must not be applied
	// again after a restart, since a joint configuration change applied
	// twice is an error raft panics on.
	ConfIndex uint64
}

// ReadState reads dir's raft.state. found is false when there is none
// (a replica never started); a file that fails its checks is
// ErrCorruptState.
func ReadState(fsys log.FS, dir string) (st State, found bool, err error) {
	name := filepath.Join(dir, StateFile)
	b, err := readSmallFile(fsys, name, stateHeader+2*(4+maxStatePart)+4)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, false, nil
	}
	if errors.Is(err, errTooLarge) {
		return State{}, false, fmt.Errorf("%w: %v", ErrCorruptState, err)
	}
	if err != nil {
		return State{}, false, err
	}
	if st, err = decodeState(b); err != nil {
		return State{}, false, fmt.Errorf("%w: %s: %v", ErrCorruptState, name, err)
	}
	return st, true, nil
}

// WriteState replaces dir's raft.state with st, durably: when it returns
// nil, a crash at any later point finds st; a crash before finds st or
// the previous state, never a mix. An error must stop the replica, and
// not be retried: the new state may already be visible to a reader in
// this process without being durable (a vote answered from it could be
// forgotten by a power loss). One writer per directory (the replica's
// raft goroutine): writes share the .tmp name.
func WriteState(fsys log.FS, dir string, st State) error {
	b, err := encodeState(st)
	if err != nil {
		return err
	}
	return writeFileAtomic(fsys, dir, StateFile, b)
}

var marshal = proto.MarshalOptions{Deterministic: true}

func encodeState(st State) ([]byte, error) {
	hard, conf := st.Hard, st.Conf
	if hard == nil {
		hard = &raftpb.HardState{}
	}
	if conf == nil {
		conf = &raftpb.ConfState{}
	}
	hb, err := marshal.Marshal(hard)
	if err != nil {
		return nil, fmt.Errorf("raftlog: encode HardState: %w", err)
	}
	cb, err := marshal.Marshal(conf)
	if err != nil {
		return nil, fmt.Errorf("raftlog: encode ConfState: %w", err)
	}
	if len(hb) > maxStatePart || len(cb) > maxStatePart {
		return nil, fmt.Errorf("raftlog: state of %d+%d bytes is too large", len(hb), len(cb))
	}
	b := make([]byte, 0, stateHeader+8+4+len(hb)+4+len(cb)+4)
	b = append(b, stateMagic...)
	b = append(b, stateVersion, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, st.ConfIndex)
	b = binary.BigEndian.AppendUint32(b, uint32(len(hb)))
	b = append(b, hb...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(cb)))
	b = append(b, cb...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

func decodeState(b []byte) (State, error) {
	if len(b) < stateHeader+8+4+4+4 {
		return State{}, fmt.Errorf("%d bytes", len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return State{}, errors.New("crc mismatch")
	}
	if string(body[:4]) != stateMagic || body[4] != stateVersion || body[5]|body[6]|body[7] != 0 {
		return State{}, fmt.Errorf("header % x", body[:stateHeader])
	}
	confIndex := binary.BigEndian.Uint64(body[stateHeader:])
	rest := body[stateHeader+8:]
	part := func() ([]byte, error) {
		if len(rest) < 4 {
			return nil, errors.New("truncated")
		}
		n := binary.BigEndian.Uint32(rest)
		if n > maxStatePart || int64(n) > int64(len(rest)-4) {
			return nil, fmt.Errorf("part of %d bytes with %d left", n, len(rest)-4)
		}
		p := rest[4 : 4+n]
		rest = rest[4+n:]
		return p, nil
	}
	hb, err := part()
	if err != nil {
		return State{}, err
	}
	cb, err := part()
	if err != nil {
		return State{}, err
	}
	if len(rest) != 0 {
		return State{}, fmt.Errorf("%d bytes after the ConfState", len(rest))
	}
	st := State{Hard: &raftpb.HardState{}, Conf: &raftpb.ConfState{}, ConfIndex: confIndex}
	if err := proto.Unmarshal(hb, st.Hard); err != nil {
		return State{}, fmt.Errorf("HardState: %w", err)
	}
	if err := proto.Unmarshal(cb, st.Conf); err != nil {
		return State{}, fmt.Errorf("ConfState: %w", err)
	}
	// Fields this version does not know mean a newer writer: refuse,
	// rather than drop what it stored (a downgrade fails loudly).
	if len(st.Hard.ProtoReflect().GetUnknown()) > 0 || len(st.Conf.ProtoReflect().GetUnknown()) > 0 {
		return State{}, errors.New("unknown protobuf fields")
	}
	return st, nil
}
