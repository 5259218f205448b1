package broker

// ElectLeaders (43).
//
// Behavior: a preferred election (ElectionType 0; the only one of v0)
// makes each partition's preferred replica (its first) the leader, as
// kafka-leader-election.sh --election-type PREFERRED and kadm's
// ElectLeaders ask. Per partition: ELECTION_NOT_NEEDED when it leads
// already (always on a single node, the only replica);
// PREFERRED_LEADER_NOT_AVAILABLE when it is fenced or not in the ISR;
// UNKNOWN_TOPIC_OR_PARTITION; else the election, answered once the
// preferred replica leads, or REQUEST_TIMED_OUT when it does not within
// TimeoutMillis (cluster.Node.ElectPreferred: the leader hands
// leadership over through raft). A null topic list elects every
// partition and, as Kafka's controller, leaves out of the answer the
// partitions whose election was not needed.
//
// An unclean election (ElectionType 1) is ELECTION_NOT_NEEDED for a
// partition with a live leader, as in Kafka; one without is
// ELIGIBLE_LEADERS_NOT_AVAILABLE: raft elects only a replica holding
// every committed record, on its own as soon as a majority of the
// replicas is up, and cannot make a replica outside that rule the
// leader (which could lose acknowledged records, as Kafka's unclean
// election may). Other election types are INVALID_REQUEST.
//
// Version notes: v1 adds ElectionType and the top-level error code; v2
// is flexible.
//
// Authorization: Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED at
// the top and for every partition asked for), as Kafka.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/cluster"
	"github.com/shoal-mq/shoal/broker/topics"
)

func init() { registerSimple(43, 0, 2, handleElectLeaders) }

func handleElectLeaders(c *conn, req *kmsg.ElectLeadersRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode = code
		for _, rt := range req.Topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.ErrorMessage = p, code, &msg
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	if !c.mayCluster(acl.Alter) {
		return fail(kerr.ClusterAuthorizationFailed.Code, "Alter on the cluster is needed to elect leaders")
	}
	if req.Version == 0 {
		req.ElectionType = 0
	}
	if req.ElectionType != 0 && req.ElectionType != 1 {
		return fail(kerr.InvalidRequest.Code, "unknown election type")
	}
	all := req.Topics == nil
	type part struct {
		topic string
		index int32
		name  string // the cluster's group name (cluster.PartitionName)
	}
	var asked []part
	if all {
		ts := b.topics.All()
		slices.SortFunc(ts, func(x, y *topics.Topic) int { return strings.Compare(x.Name, y.Name) })
		for _, t := range ts {
			for i := range b.topics.PartitionCount(t) {
				asked = append(asked, part{t.Name, i, cluster.PartitionName(t.Name, i)})
			}
		}
	} else {
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				asked = append(asked, part{rt.Topic, p, cluster.PartitionName(rt.Topic, p)})
			}
		}
	}
	codes := make([]int16, len(asked))
	msgs := make([]string, len(asked))
	var elect []string // a cluster's preferred elections
	for i, p := range asked {
		switch {
		case !b.topics.HasPartition(p.topic, p.index):
			codes[i] = kerr.UnknownTopicOrPartition.Code
		case b.cluster == nil:
			// One replica, leading: preferred, and live.
			codes[i] = kerr.ElectionNotNeeded.Code
		case req.ElectionType == 1:
			codes[i], msgs[i] = b.uncleanElection(p.name)
		default:
			elect = append(elect, p.name)
		}
	}
	if len(elect) > 0 {
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = 60 * time.Second
		}
		ctx, cancel := context.WithTimeout(b.ctx, timeout)
		outcomes := b.cluster.ElectPreferred(ctx, elect)
		cancel()
		for i, p := range asked {
			err, ok := outcomes[p.name]
			if !ok || codes[i] != 0 {
				continue
			}
			switch {
			case err == nil:
			case errors.Is(err, cluster.ErrElectionNotNeeded):
				codes[i] = kerr.ElectionNotNeeded.Code
			case errors.Is(err, cluster.ErrPreferredNotAvailable):
				codes[i], msgs[i] = kerr.PreferredLeaderNotAvailable.Code, err.Error()
			case errors.Is(err, cluster.ErrUnknownPartition):
				codes[i] = kerr.UnknownTopicOrPartition.Code
			case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
				codes[i], msgs[i] = kerr.RequestTimedOut.Code, "the preferred replica did not take leadership within the request's timeout"
			default:
				codes[i], msgs[i] = clusterCode(err), err.Error()
			}
		}
	}
	byTopic := map[string]int{}
	addTopic := func(name string) int {
		ti, ok := byTopic[name]
		if !ok {
			ti = len(resp.Topics)
			byTopic[name] = ti
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = name
			resp.Topics = append(resp.Topics, st)
		}
		return ti
	}
	for _, rt := range req.Topics { // in the request's order, even with no partitions
		addTopic(rt.Topic)
	}
	for i, p := range asked {
		ti := addTopic(p.topic)
		if all && codes[i] == kerr.ElectionNotNeeded.Code {
			continue // as Kafka's controller answers an election of all partitions
		}
		sp := kmsg.NewElectLeadersResponseTopicPartition()
		sp.Partition, sp.ErrorCode = p.index, codes[i]
		if msgs[i] != "" {
			sp.ErrorMessage = &msgs[i]
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, sp)
	}
	return resp
}

// uncleanElection answers an unclean election of cluster partition
// name: a live leader (published, not fenced) needs none; without one,
// raft elects on its own once a majority of the replicas is up, and no
// replica outside its rule can be made the leader.
func (b *Broker) uncleanElection(name string) (int16, string) {
	ps, ok := b.cluster.PartitionState(name)
	if ok && ps.Leader != 0 && !b.cluster.Fenced(ps.Leader) {
		return kerr.ElectionNotNeeded.Code, ""
	}
	return kerr.EligibleLeadersNotAvailable.Code, "no leader: raft elects one as soon as a majority of the replicas is up; it cannot elect a replica missing committed records"
}
