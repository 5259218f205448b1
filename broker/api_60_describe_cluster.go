package broker

// DescribeCluster (60).
//
// Behavior: a single node is the cluster, with its advertised address
// and no rack, and it is also the controller; the cluster id is the one
// kept in the metadata store. In a cluster (cluster.go) the brokers are
// those registered in the metadata log, the controller the metadata
// group's leader (-1 while there is none), and the cluster id the one
// derived from the voters. ClusterAuthorizedOperations is INT32_MIN
// ("not requested") unless the client asks, and then KIP-430's set of
// the cluster operations the caller may do (every one with the
// authorizer off), or 0 if it may not Describe the cluster, as Kafka.
//
// Version notes: v1 adds EndpointType (KIP-919): we serve the broker
// endpoint (1) only; asking for controllers (2) or anything else gets
// UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers. v2 adds
// IncludeFencedBrokers and IsFenced (KIP-1073): a single node is never
// fenced; in a cluster a broker the metadata leader has not heard from
// for broker.session.timeout.ms is (cluster.Image.Fenced), left out
// unless IncludeFencedBrokers. Metadata keeps listing it (a partition's
// published leader may still name it until a new one publishes) and
// reports its replicas in OfflineReplicas.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(60, 0, 2, handleDescribeCluster) }

func handleDescribeCluster(c *conn, req *kmsg.DescribeClusterRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "this broker only serves the broker endpoint type (1)"
		resp.ErrorMessage = &msg
		return resp
	}
	resp.ClusterID = b.clusterID
	if b.cluster != nil {
		brokers, controller := b.clusterBrokers()
		resp.ControllerID = controller
		for _, mb := range brokers {
			fenced := b.cluster.Fenced(uint64(mb.NodeID))
			if fenced && !req.IncludeFencedBrokers {
				continue // as Kafka: fenced brokers only when asked for
			}
			br := kmsg.NewDescribeClusterResponseBroker()
			br.NodeID, br.Host, br.Port, br.Rack, br.IsFenced = mb.NodeID, mb.Host, mb.Port, mb.Rack, fenced
			resp.Brokers = append(resp.Brokers, br)
		}
	} else {
		resp.ControllerID = b.cfg.NodeID
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port = b.cfg.NodeID, c.ln.advHost, c.ln.advPort
		resp.Brokers = append(resp.Brokers, br)
	}
	resp.ClusterAuthorizedOperations = c.clusterOps(req.IncludeClusterAuthorizedOperations)
	return resp
}
