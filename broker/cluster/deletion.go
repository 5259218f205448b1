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
// goroutine): it records the deletion, tells OnTopicDeleted, stops the
// topic's groups, closes their logs without making anything durable and
// moves their directories aside (renamed to <name>.<topic id>-delete,
// one directory fsync for all), as Kafka does; a goroutine of its own
// then deletes the moved directories. The metadata group goes on at
// once (the fsyncs of a 600-partition topic's removal held it for 4 to
// 7 s, on every broker at once; review), and a topic created again at
// once under the name finds its directories free. Applied again after a
// restart, it finds no group running and moves aside what a crash left
// (Start deletes what was moved and not deleted yet).
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
	var halted []*group
	n.mu.Lock()
	for i := range t.Partitions {
		name := PartitionName(t.Name, int32(i))
		if g := n.groups[name]; g != nil && g.topicID == t.ID {
			delete(n.groups, name)
			close(g.halt) // all at once: they stop in parallel
			halted = append(halted, g)
		}
	}
	n.mu.Unlock()
	for _, g := range halted {
		<-g.exited // every produce waiting on it answered; at most an fsync under way
		_ = g.p.CloseDiscard()
	}
	var moved []string
	for i := range t.Partitions {
		name := PartitionName(t.Name, int32(i))
		if name == MetadataGroup {
			continue // never created (the image refuses MetadataTopic); never removed
		}
		to, err := moveAside(n.cfg.FS, filepath.Join(n.cfg.DataDir, name), t.ID)
		if err != nil {
			n.logger.Error("cannot delete a deleted topic's partition", zap.String("partition", name), zap.Error(err))
		} else if to != "" {
			moved = append(moved, to)
		}
	}
	if len(moved) > 0 {
		if err := n.cfg.FS.SyncDir(n.cfg.DataDir); err != nil {
			n.logger.Error("cannot delete a deleted topic's partitions", zap.String("topic", t.Name), zap.Error(err))
		}
		n.removeMoved(moved)
	}
	if first {
		n.logger.Info("deleted topic", zap.String("topic", t.Name))
	}
}

// deleteSuffix ends the name of a directory moved aside by a deletion
// (moveAside), as Kafka's "-delete".
const deleteSuffix = "-delete"

// moveAside renames dir, a partition directory of the deleted topic id,
// to <dir>.<id hex>-delete and returns the new path; "" when there is
// nothing to move (no directory, or another incarnation's). The caller
// fsyncs the parent.
func moveAside(fsys log.FS, dir string, id [16]byte) (string, error) {
	have, ok, err := dirTopic(fsys, dir)
	if err != nil {
		return "", err
	}
	if ok && have != id {
		return "", nil // a later incarnation's
	}
	to := dir + "." + hex.EncodeToString(id[:]) + deleteSuffix
	err = fsys.Rename(dir, to)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// An earlier attempt's, which a crash left: removed, then again.
		if rerr := fsys.RemoveAll(to); rerr != nil {
			return "", rerr
		}
		err = fsys.Rename(dir, to)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	}
	return to, nil
}

// removeMoved deletes directories moveAside moved, on a goroutine of
// its own (Close waits for it).
func (n *Node) removeMoved(dirs []string) {
	n.wg.Add(1) // called from the metadata group's goroutine or Start: Close is not past its Wait
	go func() {
		defer n.wg.Done()
		for _, d := range dirs {
			if err := n.cfg.FS.RemoveAll(d); err != nil {
				n.logger.Error("cannot remove a deleted partition's directory", zap.String("dir", d), zap.Error(err))
			}
		}
		if err := n.cfg.FS.SyncDir(n.cfg.DataDir); err != nil {
			n.logger.Warn("cannot sync the data directory", zap.Error(err))
		}
	}()
}

// removeLeftMoved deletes the directories a deletion moved aside and a
// crash left (Start).
func (n *Node) removeLeftMoved() error {
	names, err := n.cfg.FS.ReadDir(n.cfg.DataDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var left []string
	for _, name := range names {
		if strings.HasSuffix(name, deleteSuffix) {
			left = append(left, filepath.Join(n.cfg.DataDir, name))
		}
	}
	if len(left) > 0 {
		n.removeMoved(left)
	}
	return nil
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
