package dedup

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

const (
	WindowConfig      = "dedup.window.ms"
	KeyConfig         = "dedup.key"
	ScopeConfig       = "dedup.scope"
	GroupHeaderConfig = "dedup.message.group.header"

	maxWindowMs = 7 * 24 * 3600 * 1000
)

// ConfigDefs are the topic configs of the dedup window
// (appended to topicConfigDefs).
var ConfigDefs = []configs.Def{
	{Name: WindowConfig, Type: kmsg.ConfigTypeLong, Default: "0", Check: configs.IntRange(0, maxWindowMs),
		Doc: "Drop a produced record whose dedup id was appended within this many milliseconds (0: off)."},
	{Name: KeyConfig, Type: kmsg.ConfigTypeString, Default: "header:dedup-id", Check: checkKey,
		Doc: "Where a record's dedup id comes from: header:NAME (the first header NAME) or content (a hash of key and value)."},
	{Name: ScopeConfig, Type: kmsg.ConfigTypeString, Default: "topic", Check: configs.OneOf("topic", "message-group"),
		Doc: "topic: one dedup id space per topic; message-group: per message group (dedup.message.group.header)."},
	{Name: GroupHeaderConfig, Type: kmsg.ConfigTypeString, Default: "message-group-id", Check: nonEmpty,
		Doc: "The header naming a record's message group for dedup.scope=message-group."},
}

func checkKey(v string) error {
	if v == "content" || strings.HasPrefix(v, "header:") && len(v) > len("header:") {
		return nil
	}
	return fmt.Errorf("value %q is not header:<name> or content", v)
}

func nonEmpty(v string) error {
	if v == "" {
		return fmt.Errorf("value must not be empty")
	}
	return nil
}

// Settings are a topic's effective dedup configs; window 0 is off.
type Settings struct {
	windowMs    int64
	header      string // the id header; "" with content
	content     bool
	groupScope  bool
	groupHeader string
}

// SettingsFrom resolves a topic's dedup configs; value returns a
// config's effective value for the topic (override, broker default or
// Kafka's default).
func SettingsFrom(value func(name string) string) Settings {
	v := value(WindowConfig)
	ms := configs.Int(v, 0)
	if ms <= 0 {
		return Settings{}
	}
	key, scope, gh := value(KeyConfig), value(ScopeConfig), value(GroupHeaderConfig)
	s := Settings{windowMs: ms, groupScope: scope == "message-group", groupHeader: gh}
	if key == "content" {
		s.content = true
	} else {
		s.header = strings.TrimPrefix(key, "header:")
	}
	return s
}

// id returns r's dedup id, "" for none.
func (s *Settings) id(r *kmsg.Record) string {
	var id []byte
	if s.content {
		h := sha256.New()
		var n [8]byte
		klen := uint64(math.MaxUint64) // null key
		if r.Key != nil {
			klen = uint64(len(r.Key))
		}
		binary.BigEndian.PutUint64(n[:], klen)
		h.Write(n[:])
		h.Write(r.Key)
		// A null value (a tombstone) is not an empty one.
		if r.Value == nil {
			h.Write([]byte{0})
		} else {
			h.Write([]byte{1})
			h.Write(r.Value)
		}
		id = h.Sum(nil)
	} else {
		found := false
		for _, hd := range r.Headers {
			if hd.Key == s.header {
				id, found = hd.Value, true
				break
			}
		}
		if !found || len(id) == 0 {
			return "" // no id, or an empty one: never a duplicate, in either scope
		}
	}
	if !s.groupScope {
		return string(id)
	}
	var group []byte
	for _, hd := range r.Headers {
		if hd.Key == s.groupHeader {
			group = hd.Value
			break
		}
	}
	// Length-prefixed so no (group, id) pair collides with another.
	return strconv.Itoa(len(group)) + ":" + string(group) + string(id)
}

// Window holds each topic's dedup table, by topic id (an id is
// never used again). mu is a leaf guarding the map only. A table is made
// on a topic's first deduplicated produce and dropped when the topic is
// deleted; a produce racing the deletion may make one again for the dead
// id, which then stays empty (its append fails on the deleted log and
// takes its ids back).
type Window struct {
	o      Options
	mu     sync.Mutex
	tables map[[16]byte]*topicTable
}

// Options are what a Window needs, given once (New).
type Options struct {
	// Registry is read to rebuild a topic's table from its partitions.
	Registry *topics.Registry
	// Syncer and Always: a duplicate waits for its first copy's fsync
	// under the "always" fsync policy.
	Syncer *topics.Syncer
	Always bool
	Logger *zap.Logger
}

// New returns an empty window (tables are built on first use).
func New(o Options) *Window {
	return &Window{o: o, tables: map[[16]byte]*topicTable{}}
}

// table returns topic id's table, making it if needed.
func (w *Window) table(id [16]byte) *topicTable {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.tables[id]
	if d == nil {
		d = &topicTable{}
		w.tables[id] = d
	}
	return d
}

// Has reports whether topic id has a table (a read-out for tests).
func (w *Window) Has(id [16]byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tables[id] != nil
}

// Forget drops a deleted topic's table.
func (w *Window) Forget(id [16]byte) {
	w.mu.Lock()
	delete(w.tables, id)
	w.mu.Unlock()
}

// topicTable is one topic's ids within the window. mu guards everything;
// it is held during a produce's lookup and insertion and during a
// rebuild (which reads the topic's logs: only that topic's produces
// wait).
type topicTable struct {
	mu       sync.Mutex
	settings Settings // what the table was built for
	built    bool
	ids      map[string]slot
	queue    []queued // insertions, expiry order
	head     int
}

// slot is one id of the window: its expiry (unix ms), the append that
// inserted it (nil once known durable: rebuilt from the log), and where
// its record is: partition and offset when rebuilt, else its offset
// delta in w's append (w.base + delta once w is done).
type slot struct {
	exp   int64
	w     *write
	part  int32
	off   int64 // -1: w.base + delta
	delta int64
}

// Origin is where the first copy of a record Append dropped is: the
// Index-th record of the append's batches, first stored at Partition,
// Offset (an SQS FIFO queue answers a duplicate with the original's
// MessageId and SequenceNumber, which derive from it).
type Origin struct {
	Index     int
	Partition int32
	Offset    int64
}

// write is one produce partition's append of records whose ids it
// inserted. done is closed once the append returned; base and end (the
// offsets of its first record and after its last) or err (it failed)
// are then set.
type write struct {
	p    *topics.Partition
	done chan struct{}
	base int64
	end  int64
	err  error
	// The ids it inserted, forgotten again if its append or fsync
	// fails, so that a retry stores the record.
	d   *topicTable
	ids []string
}

// forgetIDs removes w's ids that still point at w: its records were not
// stored durably.
func (w *write) forgetIDs() {
	if w == nil || w.d == nil {
		return
	}
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	w.forgetIDsLocked()
}

// forgetIDsLocked is forgetIDs with the table's mu held.
func (w *write) forgetIDsLocked() {
	for _, id := range w.ids {
		if e, ok := w.d.ids[id]; ok && e.w == w {
			delete(w.d.ids, id)
		}
	}
}

// durable waits until w's records are durable (FsyncAlways) or at least
// appended (otherwise: they were acknowledged the same way).
func (w *write) durable(win *Window) error {
	<-w.done
	if w.err != nil {
		return fmt.Errorf("%w: the first copy of a duplicate failed: %v", slog.ErrStorage, w.err)
	}
	if !win.o.Always || w.p.Log.HighWatermark() >= w.end {
		return nil // the high watermark follows the fsynced end
	}
	if ch := win.o.Syncer.Appended(w.p, w.end-1, w.end, true); ch != nil {
		if err := <-ch; err != nil {
			w.forgetIDs()
			return err
		}
	}
	return nil
}

type queued struct {
	id  string
	exp int64
}

// expireLocked drops ids whose expiry is at or before nowMs.
func (d *topicTable) expireLocked(nowMs int64) {
	for d.head < len(d.queue) && d.queue[d.head].exp <= nowMs {
		e := d.queue[d.head]
		if d.ids[e.id].exp == e.exp {
			delete(d.ids, e.id)
		}
		d.queue[d.head] = queued{}
		d.head++
	}
	if d.head > 1024 && d.head > len(d.queue)/2 {
		d.queue = append(d.queue[:0], d.queue[d.head:]...)
		d.head = 0
	}
}

func (d *topicTable) insertLocked(id string, exp int64, w *write, part int32, off, delta int64) {
	d.ids[id] = slot{exp: exp, w: w, part: part, off: off, delta: delta}
	d.queue = append(d.queue, queued{id, exp})
}

// rebuildLocked fills the table from the last window of every partition
// of t.
func (d *topicTable) rebuildLocked(win *Window, t *topics.Topic, s Settings, now time.Time) error {
	d.settings, d.built = s, false
	d.ids, d.queue, d.head = map[string]slot{}, nil, 0
	nowMs := now.UnixMilli()
	parts, _ := win.o.Registry.Snapshot(t)
	for _, p := range parts {
		off, _, found := p.Log.OffsetForTimestamp(nowMs - s.windowMs)
		if !found {
			continue
		}
		// Records at or above the high watermark (the fsynced end under
		// FsyncAlways) may still be lost: their ids point at a write
		// that is done once everything read here is durable.
		hw, leo := p.Log.HighWatermark(), p.Log.LogEndOffset()
		var pending *write
		if hw < leo {
			pending = &write{p: p, done: make(chan struct{}), end: leo, d: d}
			close(pending.done)
		}
		for end := leo; off < end; {
			raw, err := p.Log.Read(off, end, 1<<20, true)
			if err != nil {
				return fmt.Errorf("dedup: rebuild of %s-%d: %w", t.Name, p.Index, err)
			}
			if len(raw) == 0 {
				break
			}
			next := off
			err = records.EachBatch(raw, func(h *protocol.BatchHeader, batch []byte) error {
				next = h.LastOffset() + 1
				if h.IsControl() || h.IsTransactional() { // never deduplicated, see filterLocked
					return nil
				}
				return records.EachRecord(batch, func(o, ts int64, r *kmsg.Record, _ []byte) bool {
					if exp := ts + s.windowMs; exp > nowMs {
						if id := s.id(r); id != "" {
							if cur, ok := d.ids[id]; !ok || cur.exp < exp {
								var w *write
								if o >= hw {
									w = pending
									w.ids = append(w.ids, id)
								}
								d.insertLocked(id, exp, w, p.Index, o, 0)
							}
						}
					}
					return true
				})
			})
			if err != nil {
				return fmt.Errorf("dedup: rebuild of %s-%d: %w", t.Name, p.Index, err)
			}
			if next <= off {
				break
			}
			off = next
		}
	}
	sort.SliceStable(d.queue, func(i, j int) bool { return d.queue[i].exp < d.queue[j].exp })
	d.built = true
	win.o.Logger.Debug("rebuilt dedup table", zap.String("topic", t.Name), zap.Int("ids", len(d.ids)))
	return nil
}

// Append appends a produce partition's records to p, first dropping the
// records whose dedup id is within t's window (s from SettingsFrom).
// Without a window it is p.Log.Append. It also returns what the answer
// depends on: the appends of the first copies of the records it dropped
// (the produce is answered only once they are durable, Deps.Wait) and
// its own.
func (win *Window) Append(t *topics.Topic, p *topics.Partition, s Settings, batches []byte, now time.Time) (slog.AppendResult, Deps, error) {
	if s.windowMs <= 0 {
		res, err := p.Log.Append(batches, now)
		return res, Deps{}, err
	}
	// max.message.bytes applies to the batches the client sent, as
	// Append would check them: a batch rewritten without its duplicates
	// is uncompressed and may be larger (AppendCompacted does not check).
	maxBytes := int64(p.Log.Config().MaxMessageBytes)
	for rest := batches; len(rest) > 0; {
		batch, next, err := protocol.NextBatch(rest)
		if err != nil {
			break // filterLocked reports it
		}
		if int64(len(batch)) > maxBytes {
			return slog.AppendResult{}, Deps{}, fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes %d", slog.ErrMessageTooLarge, len(batch), maxBytes)
		}
		rest = next
	}
	d := win.table(t.ID)
	nowMs := now.UnixMilli()
	exp := nowMs + s.windowMs
	w := &write{p: p, done: make(chan struct{}), d: d}
	d.mu.Lock()
	if !d.built || d.settings != s {
		if err := d.rebuildLocked(win, t, s, now); err != nil {
			d.mu.Unlock()
			return slog.AppendResult{}, Deps{}, err
		}
	}
	d.expireLocked(nowMs)
	out, rewritten, added, deps, origins, err := d.filterLocked(s, batches, exp, w)
	w.ids = added
	if err != nil {
		w.forgetIDsLocked()
		d.mu.Unlock()
		w.err = err
		close(w.done)
		return slog.AppendResult{}, Deps{}, err
	}
	d.mu.Unlock()
	var res slog.AppendResult
	if rewritten {
		res, err = p.Log.AppendCompacted(out, now)
	} else {
		res, err = p.Log.Append(batches, now)
	}
	if err != nil {
		// Removed before done is closed: a duplicate that saw them
		// fails, and its retry finds them gone.
		w.forgetIDs()
		w.err = err
	} else {
		w.base, w.end = res.BaseOffset, res.LastOffset+1
	}
	close(w.done)
	if len(added) == 0 {
		w = nil
	}
	return res, Deps{first: deps, own: w, win: win, origins: origins}, err
}

// Deps are what a deduplicated append's answer depends on: the
// appends of the first copies of the records it dropped (first), and its
// own append when it inserted ids (own), whose ids are forgotten if its
// fsync fails.
type Deps struct {
	first   []*write
	own     *write
	win     *Window
	origins []pendingOrigin
}

// Origins are where the records the append dropped were first stored,
// by their index in the append's batches. Call it after Wait returned
// nil (the first copies' appends are then done).
func (d Deps) Origins() []Origin {
	out := make([]Origin, 0, len(d.origins))
	for _, o := range d.origins {
		at := Origin{Index: o.index, Partition: o.s.part, Offset: o.s.off}
		if o.s.off < 0 {
			<-o.s.w.done
			at.Offset = o.s.w.base + o.s.delta
		}
		out = append(out, at)
	}
	return out
}

// Failed is called when the append's own fsync failed: its records were
// not stored durably, so their ids are forgotten and a retry stores them.
func (d Deps) Failed() { d.own.forgetIDs() }

// Wait waits until the first copies of the records the append dropped
// are durable (under the "always" fsync policy; appended otherwise), and
// returns the first failure: a duplicate is answered only once its first
// copy is as durable as its own answer promises.
func (d Deps) Wait() error {
	for _, w := range d.first {
		if err := w.durable(d.win); err != nil {
			return err
		}
	}
	return nil
}

// Waits is how many first copies Wait waits for.
func (d Deps) Waits() int { return len(d.first) }

// filterLocked looks up and inserts the ids of the records of batches. It
// returns the records to append (a new buffer only if some batch lost
// records), the ids it inserted (for w, the append to come) and the
// appends of the first copies of the records it dropped that are not
// known durable. mu held.
func (d *topicTable) filterLocked(s Settings, batches []byte, exp int64, w *write) (out []byte, rewritten bool, added []string, deps []*write, origins []pendingOrigin, err error) {
	var keep [][]byte // wire records of the current batch
	// index counts the records of the batches before this one; base is
	// this batch's first offset delta in the append (batches after the
	// first continue the offsets of those before, as the log assigns
	// them).
	index, base := 0, int64(0)
	part := int32(-1)
	if w != nil && w.p != nil {
		part = w.p.Index
	}
	for pos := 0; pos < len(batches); {
		batch, _, err := protocol.NextBatch(batches[pos:])
		if err != nil {
			return nil, false, added, deps, origins, fmt.Errorf("%w: %v", slog.ErrCorruptMessage, err)
		}
		start := pos
		pos += len(batch)
		h, _ := protocol.ParseBatchHeader(batch)
		if !protocol.VerifyBatchCRC(batch) {
			return nil, false, added, deps, origins, fmt.Errorf("%w: batch crc mismatch", slog.ErrCorruptMessage)
		}
		// Refused here as the log's Append would: AppendCompacted must
		// only ever see holes this filter made.
		switch {
		case h.IsControl():
			return nil, false, added, deps, origins, fmt.Errorf("%w: control batch", slog.ErrInvalidRecord)
		case h.RecordCount <= 0 || h.LastOffsetDelta < 0 || int64(h.LastOffsetDelta)+1 != int64(h.RecordCount):
			return nil, false, added, deps, origins, fmt.Errorf("%w: batch has %d records and lastOffsetDelta %d", slog.ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
		}
		if h.IsTransactional() {
			// Not deduplicated: an aborted transaction's ids must not
			// drop its committed retry, and a transactional producer
			// is already idempotent.
			if rewritten {
				out = append(out, batch...)
			}
			index, base = index+int(h.RecordCount), base+int64(h.RecordCount)
			continue
		}
		keep = keep[:0]
		dups, i := 0, int64(0)
		var recErr error
		err = records.EachRecord(batch, func(off, _ int64, r *kmsg.Record, raw []byte) bool {
			if off-h.BaseOffset != i {
				recErr = fmt.Errorf("%w: record %d has offset delta %d", slog.ErrInvalidRecord, i, off-h.BaseOffset)
				return false
			}
			i++
			if id := s.id(r); id != "" {
				if e, seen := d.ids[id]; seen {
					dups++
					if e.w != nil && !slices.Contains(deps, e.w) {
						deps = append(deps, e.w)
					}
					origins = append(origins, pendingOrigin{index: index + int(i) - 1, s: e})
					return true
				}
				d.insertLocked(id, exp, w, part, -1, base+i-1)
				added = append(added, id)
			}
			keep = append(keep, raw)
			return true
		})
		switch {
		case err != nil:
			err = fmt.Errorf("%w: %v", slog.ErrCorruptMessage, err)
		case recErr != nil:
			err = recErr
		case i != int64(h.RecordCount):
			err = fmt.Errorf("%w: %d records, the header declares %d", slog.ErrInvalidRecord, i, h.RecordCount)
		}
		if err != nil {
			return nil, false, added, deps, origins, err
		}
		index, base = index+int(h.RecordCount), base+int64(h.RecordCount)
		if dups == 0 {
			if rewritten {
				out = append(out, batch...)
			}
			continue
		}
		if !rewritten {
			rewritten = true
			out = append(make([]byte, 0, len(batches)), batches[:start]...)
		}
		at := len(out)
		out = records.AppendRewritten(out, batch, keep)
		// kmsg decodes leniently; the rewritten batch must pass the
		// log's framing checks, as the client's would have.
		if err := protocol.ValidateCompactedRecords(out[at:]); err != nil {
			return nil, false, added, deps, origins, fmt.Errorf("%w: %v", slog.ErrInvalidRecord, err)
		}
	}
	return out, rewritten, added, deps, origins, nil
}

// pendingOrigin is a dropped record's first copy, resolved once the
// appends are done (Deps.Origins).
type pendingOrigin struct {
	index int
	s     slot
}
