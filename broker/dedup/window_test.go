package dedup

import (
	"encoding/binary"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

// defaults are the configs' defaults (ConfigDefs), as an effective value
// lookup returns them when nothing is overridden.
func defaults(t *testing.T, over ...string) func(string) string {
	t.Helper()
	m := map[string]string{}
	for _, d := range ConfigDefs {
		m[d.Name] = d.Default
	}
	for i := 0; i+1 < len(over); i += 2 {
		m[over[i]] = over[i+1]
	}
	return func(name string) string {
		v, ok := m[name]
		require.True(t, ok, "unknown config %q looked up", name)
		return v
	}
}

// hrec is a record with value v and header pairs hdrs.
func hrec(v string, hdrs ...string) kmsg.Record {
	r := kmsg.Record{Value: []byte(v)}
	for i := 0; i+1 < len(hdrs); i += 2 {
		r.Headers = append(r.Headers, kmsg.Header{Key: hdrs[i], Value: []byte(hdrs[i+1])})
	}
	return r
}

// idrec is a record with value v and header dedup-id=id ("" for none).
func idrec(v, id string) kmsg.Record {
	if id == "" {
		return hrec(v)
	}
	return hrec(v, "dedup-id", id)
}

// wire returns rs in wire form with offset deltas 0, 1, ... and
// timestamp deltas 10*i.
func wire(rs ...kmsg.Record) []byte {
	var raw []byte
	for i := range rs {
		r := rs[i]
		r.OffsetDelta = int32(i)
		r.TimestampDelta64 = int64(10 * i)
		raw = records.AppendRecord(raw, &r)
	}
	return raw
}

// batchOpts are the header fields of a test batch.
type batchOpts struct {
	baseOffset int64
	attrs      int16
	producerID int64
	epoch      int16
	seq        int32
	firstTs    int64
}

// mkBatch encodes rs as one batch (compressed if o.attrs says so) with a
// valid CRC; the default producer fields are -1 (non-idempotent).
func mkBatch(t *testing.T, o batchOpts, rs ...kmsg.Record) []byte {
	t.Helper()
	raw := wire(rs...)
	if c := protocol.CompressionOf(o.attrs); c != protocol.CompressionNone {
		var err error
		raw, err = records.Compress(raw, c)
		require.NoError(t, err)
	}
	if o.firstTs == 0 {
		o.firstTs = 1000
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          o.baseOffset,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           o.attrs,
		LastOffsetDelta:      int32(len(rs) - 1),
		FirstTimestamp:       o.firstTs,
		MaxTimestamp:         o.firstTs + int64(10*(len(rs)-1)),
		ProducerID:           o.producerID,
		ProducerEpoch:        o.epoch,
		FirstSequence:        o.seq,
		NumRecords:           int32(len(rs)),
		Records:              raw,
	}
	out := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-protocol.BatchLengthPrefix))
	protocol.SetBatchCRC(out)
	return out
}

// plain is mkBatch of a non-idempotent, uncompressed batch.
func plain(t *testing.T, rs ...kmsg.Record) []byte {
	return mkBatch(t, batchOpts{producerID: -1, epoch: -1, seq: -1}, rs...)
}

// values decodes every batch of raw and returns its records' values and
// their offsets, and the batches' headers.
func values(t *testing.T, raw []byte) (vals []string, offs []int64, hs []protocol.BatchHeader) {
	t.Helper()
	err := records.EachBatch(raw, func(h *protocol.BatchHeader, batch []byte) error {
		require.True(t, protocol.VerifyBatchCRC(batch), "batch CRC")
		hs = append(hs, *h)
		return records.EachRecord(batch, func(off, _ int64, r *kmsg.Record, _ []byte) bool {
			vals = append(vals, string(r.Value))
			offs = append(offs, off)
			return true
		})
	})
	require.NoError(t, err)
	return vals, offs, hs
}

// batchBytes sums the sizes of raw's whole batches.
func batchBytes(t *testing.T, raw []byte) int {
	t.Helper()
	n := 0
	require.NoError(t, records.EachBatch(raw, func(h *protocol.BatchHeader, _ []byte) error {
		n += int(h.Size())
		return nil
	}))
	return n
}

func newTable() *topicTable { return &topicTable{ids: map[string]slot{}} }

var headerSettings = Settings{windowMs: 60000, header: "dedup-id"}

func TestSettingsFromDefaultsOff(t *testing.T) {
	require.Equal(t, Settings{}, SettingsFrom(defaults(t)), "window 0 (the default) is off")
	for _, v := range []string{"0", "-1", "", "x", "1.5"} {
		s := SettingsFrom(defaults(t, WindowConfig, v, KeyConfig, "content", ScopeConfig, "message-group"))
		require.Equal(t, Settings{}, s, "window %q", v)
		require.LessOrEqual(t, s.windowMs, int64(0))
	}
}

func TestSettingsFromWindowOffLooksUpNothingElse(t *testing.T) {
	var asked []string
	s := SettingsFrom(func(name string) string {
		asked = append(asked, name)
		if name == WindowConfig {
			return "0"
		}
		return "content"
	})
	require.Equal(t, Settings{}, s)
	require.Equal(t, []string{WindowConfig}, asked)
}

func TestSettingsFromCombinations(t *testing.T) {
	for _, tc := range []struct {
		name string
		over []string
		want Settings
	}{
		{"defaults", []string{WindowConfig, "300000"},
			Settings{windowMs: 300000, header: "dedup-id", groupHeader: "message-group-id"}},
		{"max", []string{WindowConfig, "604800000"},
			Settings{windowMs: maxWindowMs, header: "dedup-id", groupHeader: "message-group-id"}},
		{"header", []string{WindowConfig, "1", KeyConfig, "header:x-id"},
			Settings{windowMs: 1, header: "x-id", groupHeader: "message-group-id"}},
		{"header-with-colon", []string{WindowConfig, "1", KeyConfig, "header:a:b"},
			Settings{windowMs: 1, header: "a:b", groupHeader: "message-group-id"}},
		{"content", []string{WindowConfig, "5", KeyConfig, "content"},
			Settings{windowMs: 5, content: true, groupHeader: "message-group-id"}},
		{"group-default-header", []string{WindowConfig, "5", ScopeConfig, "message-group"},
			Settings{windowMs: 5, header: "dedup-id", groupScope: true, groupHeader: "message-group-id"}},
		{"group-content-custom", []string{WindowConfig, "5", KeyConfig, "content", ScopeConfig, "message-group", GroupHeaderConfig, "grp"},
			Settings{windowMs: 5, content: true, groupScope: true, groupHeader: "grp"}},
		{"topic-scope", []string{WindowConfig, "5", ScopeConfig, "topic", GroupHeaderConfig, "grp"},
			Settings{windowMs: 5, header: "dedup-id", groupHeader: "grp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, SettingsFrom(defaults(t, tc.over...)))
		})
	}
}

func TestConfigDefsChecks(t *testing.T) {
	defs := map[string]func(string) error{}
	for _, d := range ConfigDefs {
		require.NoError(t, d.Check(d.Default), "%s default %q", d.Name, d.Default)
		defs[d.Name] = d.Check
	}
	require.Len(t, defs, 4)
	require.NoError(t, defs[KeyConfig]("content"))
	require.NoError(t, defs[KeyConfig]("header:h"))
	require.Error(t, defs[KeyConfig]("header:"))
	require.Error(t, defs[KeyConfig]("Content"))
	require.NoError(t, defs[WindowConfig]("604800000"))
	require.Error(t, defs[WindowConfig]("604800001"))
	require.Error(t, defs[GroupHeaderConfig](""))
}

func TestIDHeaderMode(t *testing.T) {
	s := headerSettings
	r := hrec("v", "other", "o", "dedup-id", "first", "dedup-id", "second")
	require.Equal(t, "first", s.id(&r), "the first header wins")
	r = hrec("v", "other", "o")
	require.Equal(t, "", s.id(&r), "no header: no id")
	r = hrec("v")
	require.Equal(t, "", s.id(&r))
	r = hrec("v", "Dedup-Id", "x")
	require.Equal(t, "", s.id(&r), "header names are case-sensitive")
	// The value and key do not matter in header mode.
	a, b := hrec("a", "dedup-id", "x"), hrec("b", "dedup-id", "x")
	b.Key = []byte("k")
	require.Equal(t, s.id(&a), s.id(&b))
}

func TestIDContentMode(t *testing.T) {
	s := Settings{windowMs: 1, content: true}
	id := func(key, value []byte, hdrs ...string) string {
		r := hrec("", hdrs...)
		r.Key, r.Value = key, value
		return s.id(&r)
	}
	base := id([]byte("k"), []byte("v"))
	require.Len(t, base, 32, "a SHA-256")
	require.Equal(t, base, id([]byte("k"), []byte("v"), "dedup-id", "x"), "headers are not content")
	require.NotEqual(t, base, id([]byte("k"), []byte("w")))
	require.NotEqual(t, base, id([]byte("j"), []byte("v")))
	// The key is length-prefixed: moving bytes between key and value
	// changes the id.
	require.NotEqual(t, id([]byte("ab"), []byte("c")), id([]byte("a"), []byte("bc")))
	require.NotEqual(t, id([]byte(""), []byte("ab")), id([]byte("ab"), []byte("")))
	// A null key differs from an empty one.
	require.NotEqual(t, id(nil, []byte("v")), id([]byte{}, []byte("v")))
	require.NotEmpty(t, id(nil, nil), "every record has an id in content mode")
}

// TestIDContentNullValue: content mode tells a null value (a tombstone)
// from an empty one, as it does for the key (it did not: the value was
// hashed bare, so the second of the two was dropped as a duplicate).
func TestIDContentNullValue(t *testing.T) {
	s := Settings{windowMs: 1, content: true}
	// Decoded from the wire, as filterLocked sees them.
	tomb := kmsg.Record{Key: []byte("k"), Value: nil}
	empty := kmsg.Record{Key: []byte("k"), Value: []byte{}}
	var ids []string
	nulls := []bool{}
	require.NoError(t, records.EachRecord(plain(t, tomb, empty), func(_, _ int64, r *kmsg.Record, _ []byte) bool {
		nulls = append(nulls, r.Value == nil)
		ids = append(ids, s.id(r))
		return true
	}))
	require.Equal(t, []bool{true, false}, nulls, "the wire keeps null and empty values apart")
	require.NotEqual(t, ids[0], ids[1])
}

func TestIDMessageGroupScope(t *testing.T) {
	s := Settings{windowMs: 1, header: "id", groupScope: true, groupHeader: "grp"}
	id := func(hdrs ...string) string { r := hrec("v", hdrs...); return s.id(&r) }
	require.Equal(t, "2:g1m", id("id", "m", "grp", "g1"))
	require.Equal(t, "2:g1m", id("grp", "g1", "id", "m", "grp", "g2"), "the first group header wins")
	require.Equal(t, "0:m", id("id", "m"), "no group header: the empty group")
	require.Equal(t, "", id("grp", "g1"), "no id header: no id, whatever the group")
	require.NotEqual(t, id("id", "m", "grp", "g1"), id("id", "m", "grp", "g2"))
	// Length-prefixed: no (group, id) pair collides with another.
	require.NotEqual(t, id("id", "bc", "grp", "a"), id("id", "c", "grp", "ab"))
	require.NotEqual(t, id("id", "1:ab", "grp", ""), id("id", "b", "grp", "1:a"))
	require.NotEqual(t, id("id", "m", "grp", ""), id("id", "m"+"", "grp", "0"))

	c := Settings{windowMs: 1, content: true, groupScope: true, groupHeader: "grp"}
	r1, r2, r3 := hrec("v", "grp", "g1"), hrec("v", "grp", "g2"), hrec("v", "grp", "g1", "x", "y")
	require.NotEqual(t, c.id(&r1), c.id(&r2), "content ids are per group too")
	require.Equal(t, c.id(&r1), c.id(&r3))
	require.Len(t, c.id(&r1), len("2:g1")+32)
}

// TestIDEmptyHeaderValueIsNoIDInEitherScope: a dedup header with an
// empty value is "no id" (never a duplicate) under both scopes (it was a
// real id under message-group, so such records were deduplicated
// against each other there only).
func TestIDEmptyHeaderValueIsNoIDInEitherScope(t *testing.T) {
	r := hrec("v", "dedup-id", "")
	topic := Settings{windowMs: 1, header: "dedup-id"}
	group := Settings{windowMs: 1, header: "dedup-id", groupScope: true, groupHeader: "g"}
	require.Equal(t, "", topic.id(&r))
	require.Equal(t, "", group.id(&r))
}

func TestFilterNoDuplicates(t *testing.T) {
	d := newTable()
	in := append(plain(t, idrec("a1", "a"), idrec("n1", ""), idrec("b1", "b")), plain(t, idrec("c1", "c"))...)
	orig := append([]byte(nil), in...)
	w := &write{}
	out, rewritten, added, deps, _, err := d.filterLocked(headerSettings, in, 5000, w)
	require.NoError(t, err)
	require.False(t, rewritten)
	require.Nil(t, out, "no new buffer without duplicates")
	require.Equal(t, []string{"a", "b", "c"}, added, "records without an id are not remembered")
	require.Empty(t, deps)
	require.Equal(t, orig, in, "the input is not modified")
	require.Len(t, d.ids, 3)
	for i, id := range added {
		// Where each record will be: its offset delta in the append
		// (the record without an id, the second, takes delta 1).
		require.Equal(t, slot{exp: 5000, w: w, part: -1, off: -1, delta: []int64{0, 2, 3}[i]}, d.ids[id])
	}
	require.Equal(t, []queued{{"a", 5000}, {"b", 5000}, {"c", 5000}}, d.queue)
}

func TestFilterDuplicateInOneBatch(t *testing.T) {
	d := newTable()
	w := &write{}
	in := plain(t, idrec("a1", "a"), idrec("b1", "b"), idrec("a2", "a"), idrec("n", ""), idrec("b2", "b"))
	out, rewritten, added, deps, _, err := d.filterLocked(headerSettings, in, 5000, w)
	require.NoError(t, err)
	require.True(t, rewritten)
	require.Equal(t, []string{"a", "b"}, added)
	// The first copy is this same append: it is a dependency too (Wait
	// then waits for the append's own durability, which it has anyway).
	require.Equal(t, []*write{w}, deps)
	vals, offs, hs := values(t, out)
	require.Equal(t, []string{"a1", "b1", "n"}, vals)
	require.Equal(t, []int64{0, 1, 3}, offs, "kept records keep their offset deltas")
	require.Len(t, hs, 1)
	require.Equal(t, int32(3), hs[0].RecordCount)
	require.Equal(t, int32(4), hs[0].LastOffsetDelta, "the span is kept")
	require.NoError(t, protocol.ValidateCompactedRecords(out))
	require.Equal(t, len(out), batchBytes(t, out))
}

func TestFilterDuplicateAcrossProducesKeepsHeader(t *testing.T) {
	d := newTable()
	first := &write{}
	_, _, _, _, _, err := d.filterLocked(headerSettings, plain(t, idrec("a1", "a"), idrec("b1", "b")), 5000, first)
	require.NoError(t, err)
	d.ids["r"] = slot{exp: 5000} // rebuilt from the log: known durable
	d.queue = append(d.queue, queued{"r", 5000})

	for _, codec := range []int16{0, int16(protocol.CompressionGzip), int16(protocol.CompressionZstd)} {
		t.Run("codec="+strconv.Itoa(int(codec)), func(t *testing.T) {
			o := batchOpts{baseOffset: 42, attrs: codec, producerID: 7, epoch: 3, seq: 100, firstTs: 2000}
			in := mkBatch(t, o, idrec("a2", "a"), idrec("c1", "c"+strconv.Itoa(int(codec))), idrec("r2", "r"), idrec("b2", "b"), idrec("n", ""))
			inH, err := protocol.ParseBatchHeader(in)
			require.NoError(t, err)
			second := &write{}
			out, rewritten, added, deps, _, err := d.filterLocked(headerSettings, in, 6000, second)
			require.NoError(t, err)
			require.True(t, rewritten)
			require.Equal(t, []string{"c" + strconv.Itoa(int(codec))}, added)
			require.Equal(t, []*write{first}, deps, "one dependency per first append, none for durable ids")

			vals, offs, hs := values(t, out)
			require.Equal(t, []string{"c1", "n"}, vals)
			require.Equal(t, []int64{43, 46}, offs)
			require.Len(t, hs, 1)
			h := hs[0]
			require.Equal(t, protocol.CompressionNone, h.Compression(), "rewritten uncompressed")
			require.Equal(t, int32(2), h.RecordCount)
			for name, pair := range map[string][2]int64{
				"base offset":       {inH.BaseOffset, h.BaseOffset},
				"last offset delta": {int64(inH.LastOffsetDelta), int64(h.LastOffsetDelta)},
				"producer id":       {inH.ProducerID, h.ProducerID},
				"epoch":             {int64(inH.ProducerEpoch), int64(h.ProducerEpoch)},
				"base sequence":     {int64(inH.BaseSequence), int64(h.BaseSequence)},
				"base timestamp":    {inH.BaseTimestamp, h.BaseTimestamp},
				"max timestamp":     {inH.MaxTimestamp, h.MaxTimestamp},
				"leader epoch":      {int64(inH.PartitionLeaderEpoch), int64(h.PartitionLeaderEpoch)},
			} {
				require.Equal(t, pair[0], pair[1], name)
			}
			require.Equal(t, int64(4), int64(h.LastOffsetDelta))
			require.Equal(t, inH.Attributes&^protocol.AttrCompressionMask, h.Attributes)
			require.NoError(t, protocol.ValidateCompactedRecords(out))
			// The first copies keep their slots.
			require.Equal(t, first, d.ids["a"].w)
			require.Equal(t, int64(5000), d.ids["a"].exp)
		})
	}
}

func TestFilterEveryRecordDropped(t *testing.T) {
	d := newTable()
	_, _, _, _, _, err := d.filterLocked(headerSettings, plain(t, idrec("a1", "a"), idrec("b1", "b")), 5000, nil)
	require.NoError(t, err)
	in := mkBatch(t, batchOpts{producerID: 9, epoch: 0, seq: 4}, idrec("b2", "b"), idrec("a2", "a"), idrec("a3", "a"))
	out, rewritten, added, deps, _, err := d.filterLocked(headerSettings, in, 6000, &write{})
	require.NoError(t, err)
	require.True(t, rewritten)
	require.Empty(t, added)
	require.Empty(t, deps, "the first copies' write was nil")
	vals, _, hs := values(t, out)
	require.Empty(t, vals)
	require.Len(t, hs, 1, "a batch with every record dropped keeps none but stays")
	require.Equal(t, int32(0), hs[0].RecordCount)
	require.Equal(t, int32(2), hs[0].LastOffsetDelta)
	require.Equal(t, int32(4), hs[0].BaseSequence)
	require.Equal(t, int64(protocol.BatchHeaderSize), hs[0].Size())
	require.NoError(t, protocol.ValidateCompactedRecords(out))
}

func TestFilterMixedBatches(t *testing.T) {
	d := newTable()
	clean1 := plain(t, idrec("a1", "a"))
	dups := plain(t, idrec("b1", "b"), idrec("a2", "a"))
	clean2 := plain(t, idrec("c1", "c"))
	in := append(append(append([]byte(nil), clean1...), dups...), clean2...)
	out, rewritten, added, _, _, err := d.filterLocked(headerSettings, in, 5000, &write{})
	require.NoError(t, err)
	require.True(t, rewritten)
	require.Equal(t, []string{"a", "b", "c"}, added)
	require.Equal(t, clean1, out[:len(clean1)], "batches before the first rewrite are copied verbatim")
	require.Equal(t, clean2, out[len(out)-len(clean2):], "clean batches after it too")
	vals, _, hs := values(t, out)
	require.Equal(t, []string{"a1", "b1", "c1"}, vals)
	require.Len(t, hs, 3)
	require.Equal(t, []int32{1, 1, 1}, []int32{hs[0].RecordCount, hs[1].RecordCount, hs[2].RecordCount})
	require.Equal(t, int32(1), hs[1].LastOffsetDelta)
	require.Equal(t, len(out), batchBytes(t, out))
}

func TestFilterTransactional(t *testing.T) {
	d := newTable()
	_, _, _, _, _, err := d.filterLocked(headerSettings, plain(t, idrec("a1", "a")), 5000, nil)
	require.NoError(t, err)
	txn := mkBatch(t, batchOpts{attrs: protocol.AttrTransactional, producerID: 5, epoch: 1, seq: 0},
		idrec("a2", "a"), idrec("t1", "t"), idrec("t2", "t"))

	// Alone: passed through untouched, its ids not remembered, its
	// duplicates not dropped.
	out, rewritten, added, deps, _, err := d.filterLocked(headerSettings, append([]byte(nil), txn...), 6000, &write{})
	require.NoError(t, err)
	require.False(t, rewritten)
	require.Nil(t, out)
	require.Empty(t, added)
	require.Empty(t, deps)
	require.NotContains(t, d.ids, "t")
	require.Len(t, d.queue, 1)

	// After a rewritten batch: copied verbatim.
	in := append(plain(t, idrec("a3", "a"), idrec("u1", "u")), txn...)
	out, rewritten, added, _, _, err = d.filterLocked(headerSettings, in, 6000, &write{})
	require.NoError(t, err)
	require.True(t, rewritten)
	require.Equal(t, []string{"u"}, added)
	require.Equal(t, txn, out[len(out)-len(txn):])
	vals, _, _ := values(t, out)
	require.Equal(t, []string{"u1", "a2", "t1", "t2"}, vals)
	require.NotContains(t, d.ids, "t")

	// A later non-transactional record with the transaction's id is stored.
	_, rewritten, added, _, _, err = d.filterLocked(headerSettings, plain(t, idrec("t3", "t")), 7000, nil)
	require.NoError(t, err)
	require.False(t, rewritten)
	require.Equal(t, []string{"t"}, added)
}

func TestFilterRefusesBadBatches(t *testing.T) {
	good := plain(t, idrec("g1", "g"))
	control := mkBatch(t, batchOpts{attrs: protocol.AttrControl | protocol.AttrTransactional, producerID: 5, epoch: 1, seq: -1},
		kmsg.Record{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 0}})
	badCRC := plain(t, idrec("x1", "x"))
	badCRC[len(badCRC)-1] ^= 0xff
	// A header declaring more records than it holds (CRC fixed).
	short := plain(t, idrec("y1", "y"), idrec("y2", "y2"))
	binary.BigEndian.PutUint32(short[57:], 3)
	binary.BigEndian.PutUint32(short[23:], 2)
	protocol.SetBatchCRC(short)
	// lastOffsetDelta inconsistent with the record count.
	span := plain(t, idrec("z1", "z"))
	binary.BigEndian.PutUint32(span[23:], 1)
	protocol.SetBatchCRC(span)
	// Offset deltas not 0, 1, ...
	var gap []byte
	for i, r := range []kmsg.Record{idrec("o1", "o1"), idrec("o2", "o2")} {
		r.OffsetDelta = int32(2 * i)
		gap = records.AppendRecord(gap, &r)
	}
	gapped := records.EncodeBatch(gap, 2, 1000, 1000)

	for _, tc := range []struct {
		name  string
		batch []byte
		want  error
	}{
		{"control", control, slog.ErrInvalidRecord},
		{"crc", badCRC, slog.ErrCorruptMessage},
		{"truncated", good[:len(good)-3], slog.ErrCorruptMessage},
		{"garbage", []byte{1, 2, 3}, slog.ErrCorruptMessage},
		{"fewer-records", short, slog.ErrCorruptMessage},
		{"span", span, slog.ErrInvalidRecord},
		{"offset-gap", gapped, slog.ErrInvalidRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newTable()
			w := &write{d: d}
			in := append(append([]byte(nil), good...), tc.batch...)
			out, rewritten, added, _, _, err := d.filterLocked(headerSettings, in, 5000, w)
			require.Error(t, err)
			require.True(t, errors.Is(err, tc.want), "%v is not %v", err, tc.want)
			require.Nil(t, out)
			require.False(t, rewritten)
			// The ids inserted before the failure are returned, so the
			// caller (Append) can take them back.
			require.Contains(t, added, "g")
			w.ids = added
			w.forgetIDsLocked()
			require.NotContains(t, d.ids, "g")
		})
	}
}

func TestForgetIDsOnlyOwnSlots(t *testing.T) {
	d := newTable()
	w1, w2 := &write{d: d}, &write{d: d}
	d.insertLocked("a", 10, w1, 0, -1, 0)
	d.insertLocked("b", 10, w2, 0, -1, 0)
	d.insertLocked("c", 10, nil, 0, 5, 0)
	w1.ids = []string{"a", "b", "c"}
	w1.forgetIDs()
	require.NotContains(t, d.ids, "a")
	require.Contains(t, d.ids, "b", "another write's id stays")
	require.Contains(t, d.ids, "c", "a durable id stays")
	var nilW *write
	nilW.forgetIDs()                         // no-op
	(&write{ids: []string{"b"}}).forgetIDs() // no table: no-op
	require.Contains(t, d.ids, "b")
	Deps{}.Failed() // no own write: no-op
}

func TestExpireLocked(t *testing.T) {
	d := newTable()
	d.insertLocked("a", 100, nil, 0, -1, 0)
	d.insertLocked("b", 200, nil, 0, -1, 0)
	d.insertLocked("c", 300, nil, 0, -1, 0)
	d.expireLocked(99)
	require.Len(t, d.ids, 3)
	d.expireLocked(100)
	require.NotContains(t, d.ids, "a", "an id expires at its expiry")
	require.Len(t, d.ids, 2)
	require.Equal(t, 1, d.head)
	require.Equal(t, queued{}, d.queue[0], "the expired entry is cleared")
	d.expireLocked(250)
	require.Equal(t, []string{"c"}, keys(d))
	d.expireLocked(1000)
	require.Empty(t, d.ids)
	require.Equal(t, 3, d.head)
	d.expireLocked(2000) // nothing left
	require.Equal(t, 3, d.head)
}

func TestExpireKeepsReinsertedID(t *testing.T) {
	d := newTable()
	w := &write{d: d}
	d.insertLocked("a", 100, w, 0, -1, 0)
	// The append failed: its id was forgotten, and a retry inserted it
	// again with a later expiry.
	w.ids = []string{"a"}
	w.forgetIDsLocked()
	d.insertLocked("a", 200, nil, 0, -1, 0)
	d.expireLocked(150)
	require.Equal(t, slot{exp: 200, off: -1}, d.ids["a"], "the stale queue entry does not drop the live id")
	d.expireLocked(200)
	require.Empty(t, d.ids)

	// A rebuild may insert an id twice, the later expiry winning.
	d2 := newTable()
	d2.insertLocked("x", 100, nil, 0, -1, 0)
	d2.insertLocked("x", 300, nil, 0, -1, 0)
	d2.expireLocked(100)
	require.Equal(t, slot{exp: 300, off: -1}, d2.ids["x"])
}

func TestExpireCompactsQueue(t *testing.T) {
	d := newTable()
	for i := range 3000 {
		d.insertLocked("id"+strconv.Itoa(i), int64(i+1), nil, 0, int64(i), 0)
	}
	d.expireLocked(1024) // head 1024: not above 1024
	require.Equal(t, 1024, d.head)
	require.Len(t, d.queue, 3000)
	d.expireLocked(1100) // head 1100 > 1024 but not above half
	require.Equal(t, 1100, d.head)
	require.Len(t, d.queue, 3000)
	d.expireLocked(1501) // head 1501 > 1500: compacted
	require.Equal(t, 0, d.head)
	require.Len(t, d.queue, 1499)
	require.Equal(t, queued{"id1501", 1502}, d.queue[0])
	require.Len(t, d.ids, 1499)
	// Expiry continues correctly after the compaction.
	d.expireLocked(1510)
	require.Equal(t, 9, d.head)
	require.NotContains(t, d.ids, "id1508")
	require.Contains(t, d.ids, "id1510")
	d.expireLocked(3000)
	require.Empty(t, d.ids)
	require.Equal(t, 0, d.head, "compacted again once everything expired")
	require.Empty(t, d.queue)
}

func keys(d *topicTable) []string {
	var out []string
	for k := range d.ids {
		out = append(out, k)
	}
	return out
}

func TestWindowTables(t *testing.T) {
	w := New(Options{Logger: zap.NewNop()})
	a, b := [16]byte{1}, [16]byte{2}
	require.False(t, w.Has(a))
	ta := w.table(a)
	require.NotNil(t, ta)
	require.True(t, w.Has(a))
	require.False(t, w.Has(b))
	require.Same(t, ta, w.table(a), "one table per topic id")
	tb := w.table(b)
	require.NotSame(t, ta, tb)
	w.Forget(a)
	require.False(t, w.Has(a))
	require.True(t, w.Has(b))
	w.Forget(a) // twice: no-op
	require.NotSame(t, ta, w.table(a), "a forgotten id gets a new, empty table")
	require.False(t, w.table(a).built)
}

// openLog opens a partition log on an in-memory FS.
func openLog(t *testing.T) *topics.Partition {
	t.Helper()
	l, err := slog.Open(slog.NewMemFS(), "/t-0", slog.DefaultConfig(), zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return &topics.Partition{Topic: "t", Index: 0, Log: l}
}

// TestAppendFailureForgetsIDs: when the append of a produce fails, the
// ids it inserted are removed again, so a retry stores the records.
// The topic has no partitions in the registry, so its table starts
// empty.
func TestAppendFailureForgetsIDs(t *testing.T) {
	win := New(Options{Registry: topics.NewRegistry(), Logger: zap.NewNop()})
	tp := &topics.Topic{Name: "t", ID: [16]byte{9}}
	p := openLog(t)
	now := time.UnixMilli(1_000_000)

	res, deps, err := win.Append(tp, p, headerSettings, plain(t, idrec("a1", "a")), now)
	require.NoError(t, err)
	require.Equal(t, int64(0), res.LastOffset)
	require.Zero(t, deps.Waits())
	require.NoError(t, deps.Wait())

	require.NoError(t, p.Log.Close())
	_, deps, err = win.Append(tp, p, headerSettings, plain(t, idrec("b1", "b"), idrec("a2", "a")), now)
	require.ErrorIs(t, err, slog.ErrClosed)
	require.Equal(t, 1, deps.Waits(), "a2's first copy")
	d := win.table(tp.ID)
	d.mu.Lock()
	require.NotContains(t, d.ids, "b", "the failed append's id is forgotten")
	require.Contains(t, d.ids, "a")
	d.mu.Unlock()

	// A second produce to a new log: b is new again, a still a duplicate
	// whose first copy is durable enough (not "always").
	p2 := openLog(t)
	res, deps, err = win.Append(tp, p2, headerSettings, plain(t, idrec("b2", "b"), idrec("a3", "a")), now)
	require.NoError(t, err)
	require.Equal(t, int64(1), res.LastOffset, "the rewritten batch keeps its span")
	require.Equal(t, 1, deps.Waits())
	require.NoError(t, deps.Wait())
	raw, err := p2.Log.Read(0, p2.Log.LogEndOffset(), 1<<20, true)
	require.NoError(t, err)
	vals, _, _ := values(t, raw)
	require.Equal(t, []string{"b2"}, vals)
}
