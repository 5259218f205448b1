package broker

// DescribeLogDirs (35).
//
// Behavior: Shoal has one log directory, <data dir>/logs (reported as an
// absolute path), holding every partition. For each partition asked for
// we answer its size on disk (the segment files, indexes excluded), an
// offset lag of 0 (there are no replicas catching up) and IsFuture false
// (no replica moves between directories). A null topic list asks for
// every partition, an empty one for none, as in Kafka; unknown topics
// and partitions are left out, also as in Kafka.
//
// Version notes: v1 is the same as v0 (throttling after the response);
// v0 is gone from Kafka 4 and not served; v2 is flexible; v3 adds a
// top-level error code; v4 adds the volume's TotalBytes and UsableBytes
// (statfs; -1 where unknown). v5 (IsCordoned, KIP-1066) is not served.
//
// Authorization: Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED and
// no directories).

import (
	"path/filepath"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(35, 1, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(c *conn, req *kmsg.DescribeLogDirsRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !c.mayCluster(acl.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code // v3+; before it, just no directories
		return resp
	}
	dir := filepath.Join(b.cfg.DataDir, "logs")
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sd := kmsg.NewDescribeLogDirsResponseDir()
	sd.Dir = dir
	sd.TotalBytes, sd.UsableBytes = diskSpace(dir)

	// wanted maps each topic asked for to its partitions (nil: all).
	var wanted map[string][]int32
	if req.Topics != nil {
		wanted = map[string][]int32{}
		for _, rt := range req.Topics {
			wanted[rt.Topic] = append(wanted[rt.Topic], rt.Partitions...)
		}
	}
	ts := b.topics.All()
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	for _, t := range ts {
		var only map[int32]bool
		if wanted != nil {
			ps, ok := wanted[t.Name]
			if !ok {
				continue
			}
			only = map[int32]bool{}
			for _, p := range ps {
				only[p] = true
			}
		}
		st := kmsg.NewDescribeLogDirsResponseDirTopic()
		st.Topic = t.Name
		parts, _ := b.topics.Snapshot(t)
		for _, p := range parts {
			if only != nil && !only[p.Index] {
				continue
			}
			sp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			sp.Partition = p.Index
			sp.Size = p.Log.Size()
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			sd.Topics = append(sd.Topics, st)
		}
	}
	resp.Dirs = append(resp.Dirs, sd)
	return resp
}
