package broker

// ListGroups (16).
//
// Behavior: lists every group this broker coordinates (all of them),
// sorted by id, with protocol type, state (v4+) and type (v5+: classic,
// or consumer for KIP-848 groups, whose states are Empty, Reconciling and
// Stable).
// The v4 states filter and the v5 types filter match case-insensitively;
// an empty filter matches everything and a name that is no state or type
// matches nothing, as in Kafka (no error).
//
// Share groups (share/groups.go) are listed too, with type and protocol
// type "share".
//
// Version notes: v1 throttling; v3 flexible; v4 states filter and
// GroupState (KIP-518); v5 types filter and GroupType (KIP-848).
//
// Authorization: Describe on the cluster lists every group; without it
// only the groups the caller may Describe are listed.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(16, 0, 5, handleListGroups) }

func handleListGroups(c *conn, req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.Groups = append(c.b.groups.List(req.StatesFilter, req.TypesFilter), c.b.shares.ListGroups(req.StatesFilter, req.TypesFilter)...)
	if !c.visible(acl.Describe, acl.Cluster, acl.ClusterName) {
		kept := resp.Groups[:0]
		for _, g := range resp.Groups {
			if c.visible(acl.Describe, acl.Group, g.Group) {
				kept = append(kept, g)
			}
		}
		resp.Groups = kept
	}
	sort.Slice(resp.Groups, func(i, j int) bool { return resp.Groups[i].Group < resp.Groups[j].Group })
	return resp
}
