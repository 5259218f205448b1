package broker

// DescribeUserScramCredentials (50).
//
// Behavior: the SCRAM credentials of the users named (every user with
// one when the list is null or empty, as in Kafka): each mechanism and its iterations, never
// the salt or keys. A user without credentials is RESOURCE_NOT_FOUND, a
// user named twice DUPLICATE_RESOURCE, as in Kafka.
// It needs Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED
// otherwise); with the authorizer off and super.users set, only they
// may call it (sasl.go, mayManageCredentials).
//
// Version notes: v0 only (flexible).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/security"
)

func init() { registerSimple(50, 0, 0, handleDescribeUserScramCredentials) }

func handleDescribeUserScramCredentials(c *conn, req *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !c.mayManageCredentials(acl.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Describing SCRAM credentials needs Describe on the cluster.")
		return resp
	}
	var users []string
	if len(req.Users) == 0 { // null or empty: every user, as Kafka's ScramImage.describe
		users = c.b.creds.Users()
	}
	count := map[string]int{}
	for _, u := range req.Users {
		if count[u.Name]++; count[u.Name] == 1 {
			users = append(users, u.Name)
		}
	}
	for _, u := range users {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u
		infos := c.b.creds.Describe(u)
		switch {
		case count[u] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u)
		case len(infos) == 0:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + u)
		}
		if r.ErrorCode == 0 {
			for _, in := range infos {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = security.ScramMechanismNumber(in.Mechanism), int32(in.Iterations)
				r.CredentialInfos = append(r.CredentialInfos, ci)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}
