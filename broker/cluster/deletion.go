package cluster

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/log"
)

// Topic deletion (docs/CLUSTER.md). A "delete_topic" record names the
// topic by name and id. Each broker applying it tells the broker above
// (OnTopicDeleted), then stops the groups of the topic's partitions it
// runs and deletes their logs. A topic created again under the same
// name is another incarnation: its groups have another name on the
// wire (wireName), its directories are claimed by its id (claimDir),
// and its leaders' partition_state records carry the id, so nothing of
// the old one reaches it, even from a broker that has not applied the
// deletion yet.
//
// A restarted broker applies the whole metadata log again, creations
// of deleted topics included: deletedTopicsFile lists the topics whose
// deletion it has applied, whose groups it then does not start.

const (
	// partitionMetadataFile holds the id of the topic whose partition a
	// directory holds, in Kafka's format (its partition.metadata file).
	partitionMetadataFile = "partition.metadata"
	// deletedTopicsFile lists the ids (hex, one a line) of the topics
	// whose deletion this broker has applied.
	deletedTopicsFile = "deleted-topics"
)

// DeleteTopic deletes topic name, of id, through the metadata group and
// returns once this broker applied the deletion: every broker deletes
// its replicas of the topic's partitions as it applies it. A topic that
// does not exist (or exists as another incarnation) is ErrUnknownTopic.
func (n *Node) DeleteTopic(ctx context.Context, name string, id [16]byte) error {
	outcome, err := n.propose(ctx, record{Op: "delete_topic", Topic: &Topic{Name: name, ID: id}})
	switch {
	case err != nil:
		return err
	case outcome == errUnknownTopic:
		return ErrUnknownTopic
	case outcome != "":
		return fmt.Errorf("cluster: delete topic %s: %s", name, outcome)
	}
	return nil
}

// deleteTopic applies a topic's deletion here (the metadata group's
// goroutine): it records the deletion, tells OnTopicDeleted and halts
// the topic's groups; a goroutine of its own then closes their logs and
// deletes their directories, so the metadata group goes on meanwhile (a
// topic of many partitions took seconds of fsyncs, and every broker
// applies a deletion at once: the whole group stalled; review). A
// partition whose directory is still being removed opens once that is
// done (openGroup waits for removing). Applied again after a restart, it
// finds no group running and deletes what a crash left.
func (n *Node) deleteTopic(t *Topic) {
	n.mu.Lock()
	first := !n.deleted[t.ID]
	n.deleted[t.ID] = true
	ids := make([][16]byte, 0, len(n.deleted))
	for id := range n.deleted {
		ids = append(ids, id)
	}
	n.mu.Unlock()
	if first {
		// Before anything is deleted: a restart then starts none of the
		// topic's groups. If this fails, a restart starts them again
		// until it applies the deletion again, which is only work.
		if err := n.storeDeleted(ids); err != nil {
			n.logger.Error("cannot record a topic's deletion", zap.String("topic", t.Name), zap.Error(err))
		}
	}
	n.logger.Debug("applying a topic deletion", zap.String("topic", t.Name), zap.Bool("first", first))
	if n.cfg.OnTopicDeleted != nil {
		n.cfg.OnTopicDeleted(t)
	}
	type removal struct {
		name       string
		g          *group        // its group, halted (nil: none ran here)
		prev, done chan struct{} // an earlier removal of the name to wait for; closed when this one is done
	}
	removals := make([]removal, 0, len(t.Partitions))
	n.mu.Lock()
	for i := range t.Partitions {
		name := PartitionName(t.Name, int32(i))
		if name == MetadataGroup {
			continue // never created (the image refuses MetadataTopic); never removed
		}
		g := n.groups[name]
		if g != nil && g.topicID == t.ID {
			delete(n.groups, name)
			close(g.halt)
		} else {
			g = nil
		}
		rm := removal{name: name, g: g, prev: n.removing[name], done: make(chan struct{})}
		n.removing[name] = rm.done
		removals = append(removals, rm)
	}
	n.wg.Add(1) // the metadata group's goroutine, running this, holds one: Close is not past its Wait
	n.mu.Unlock()
	go func() {
		defer n.wg.Done()
		for _, rm := range removals {
			if rm.prev != nil {
				<-rm.prev
			}
			if rm.g != nil {
				<-rm.g.exited // every produce waiting on it answered
				_ = rm.g.p.Close()
			}
			if err := removeDir(n.cfg.FS, filepath.Join(n.cfg.DataDir, rm.name), t.ID); err != nil {
				n.logger.Error("cannot delete a deleted topic's partition", zap.String("partition", rm.name), zap.Error(err))
			}
			n.mu.Lock()
			if n.removing[rm.name] == rm.done {
				delete(n.removing, rm.name)
			}
			n.mu.Unlock()
			close(rm.done)
		}
		if first {
			n.logger.Info("deleted topic", zap.String("topic", t.Name))
		}
	}()
}

// isDeleted reports whether this broker applied topic id's deletion.
func (n *Node) isDeleted(id [16]byte) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.deleted[id]
}

// loadDeleted reads deletedTopicsFile (Start).
func (n *Node) loadDeleted() error {
	n.deleted = map[[16]byte]bool{}
	b, err := readSmallFile(n.cfg.FS, filepath.Join(n.cfg.DataDir, deletedTopicsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: read %s: %w", deletedTopicsFile, err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		raw, err := hex.DecodeString(line)
		if err != nil || len(raw) != 16 {
			return fmt.Errorf("cluster: %s: bad topic id %q", deletedTopicsFile, line)
		}
		n.deleted[[16]byte(raw)] = true
	}
	return nil
}

// storeDeleted replaces deletedTopicsFile with ids, durably.
func (n *Node) storeDeleted(ids [][16]byte) error {
	slices.SortFunc(ids, func(a, b [16]byte) int { return strings.Compare(string(a[:]), string(b[:])) })
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(hex.EncodeToString(id[:]))
		sb.WriteByte('\n')
	}
	if err := n.cfg.FS.MkdirAll(n.cfg.DataDir, 0o755); err != nil {
		return err
	}
	if err := log.WriteFileAtomic(n.cfg.FS, filepath.Join(n.cfg.DataDir, deletedTopicsFile), []byte(sb.String())); err != nil {
		return err
	}
	return n.cfg.FS.SyncDir(n.cfg.DataDir)
}

// partitionMetadata is partitionMetadataFile's content for topic id:
// Kafka's, the id as Kafka prints one (URL-safe base64, no padding).
func partitionMetadata(id [16]byte) string {
	return "version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]) + "\n"
}

// dirTopic reads the topic id of a partition directory's
// partitionMetadataFile; ok false when the directory or the file does
// not exist.
func dirTopic(fsys log.FS, dir string) (id [16]byte, ok bool, err error) {
	b, err := readSmallFile(fsys, filepath.Join(dir, partitionMetadataFile))
	if errors.Is(err, fs.ErrNotExist) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, found := strings.CutPrefix(line, "topic_id: "); found {
			raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(v))
			if err != nil || len(raw) != 16 {
				return id, false, fmt.Errorf("%s: bad topic_id %q", partitionMetadataFile, v)
			}
			return [16]byte(raw), true, nil
		}
	}
	return id, false, fmt.Errorf("%s in %s has no topic_id", partitionMetadataFile, dir)
}

// claimDir makes dir the directory of a partition of topic id before
// its log opens: it creates it with partitionMetadataFile, or finds the
// file naming id. A directory without the file predates topic deletion
// in a cluster, so it holds the only incarnation its name had: it is
// claimed. One naming another topic is refused: it is not this one's.
func claimDir(fsys log.FS, dir string, id [16]byte) error {
	have, ok, err := dirTopic(fsys, dir)
	switch {
	case err != nil:
		return err
	case ok && have == id:
		return nil
	case ok:
		return fmt.Errorf("the directory holds a partition of topic id %s, not %s", hex.EncodeToString(have[:]), hex.EncodeToString(id[:]))
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := log.WriteFileAtomic(fsys, filepath.Join(dir, partitionMetadataFile), []byte(partitionMetadata(id))); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// removeDir deletes the directory of a partition of the deleted topic
// id (its group stopped), unless it is another incarnation's. The
// partitionMetadataFile goes last, so a crash half way leaves files
// the next attempt recognises as the deleted topic's (a restart applies
// the deletion again), or an empty directory.
func removeDir(fsys log.FS, dir string, id [16]byte) error {
	have, ok, err := dirTopic(fsys, dir)
	if err != nil {
		return err
	}
	if ok && have != id {
		return nil // a later incarnation's
	}
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		if name != partitionMetadataFile {
			if err := fsys.RemoveAll(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return err
	}
	if err := fsys.RemoveAll(dir); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(dir))
}

// readSmallFile reads a file of a few kilobytes.
func readSmallFile(fsys log.FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > 1<<24 {
		return nil, fmt.Errorf("%s is %d bytes", name, size)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		return nil, err
	}
	return b, nil
}
