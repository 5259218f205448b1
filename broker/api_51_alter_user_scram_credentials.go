package broker

// AlterUserScramCredentials (51).
//
// Behavior: deletes and upserts SCRAM credentials, one result per user
// named; each user's changes are durable in the metadata store before
// the answer. The client sends the salted password (RFC 5802's
// SaltedPassword), never the password; Shoal stores the salt, the
// iterations and the StoredKey and ServerKey derived from it. Kafka's
// errors: an unknown mechanism is UNSUPPORTED_SASL_MECHANISM,
// iterations outside 4096..16384 or an empty name, salt or salted
// password UNACCEPTABLE_CREDENTIAL, a user with two changes for one
// mechanism DUPLICATE_RESOURCE, a deletion of nothing RESOURCE_NOT_FOUND;
// a user with any bad change gets that error and none of its changes.
// It needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED per user
// otherwise); with the authorizer off and super.users set, only they
// may call it (sasl.go, mayManageCredentials).
// Every change is logged with the principal that made it.
//
// Version notes: v0 only (flexible).

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/security"
)

func init() { registerSimple(51, 0, 0, handleAlterUserScramCredentials) }

// refusal is a user's error in AlterUserScramCredentials.
type refusal struct {
	code int16
	msg  string
}

func handleAlterUserScramCredentials(c *conn, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	changes := map[string][]security.Change{}
	bad := map[string]refusal{}
	setBad := func(user string, code int16, msg string) {
		if _, ok := bad[user]; !ok {
			bad[user] = refusal{code, msg}
		}
	}
	add := func(ch security.Change) {
		user := ch.User
		if _, seen := changes[user]; !seen {
			order = append(order, user)
		}
		changes[user] = append(changes[user], ch)
		switch {
		case user == "":
			setBad(user, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case ch.Mechanism == "":
			setBad(user, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		}
		for _, o := range changes[user][:len(changes[user])-1] {
			if o.Mechanism == ch.Mechanism && ch.Mechanism != "" {
				setBad(user, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
			}
		}
	}
	for _, d := range req.Deletions {
		add(security.Change{Mechanism: security.ScramMechanisms[d.Mechanism], User: d.Name, Delete: true})
	}
	for _, u := range req.Upsertions {
		add(security.Change{Mechanism: security.ScramMechanisms[u.Mechanism], User: u.Name,
			Salt: u.Salt, Salted: u.SaltedPassword, Iterations: int(u.Iterations)})
		switch {
		case u.Iterations < security.MinScramIterations || u.Iterations > security.MaxScramIterations:
			setBad(u.Name, kerr.UnacceptableCredential.Code, security.ErrIterations.Error())
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			setBad(u.Name, kerr.UnacceptableCredential.Code, "Salt and salted password must not be empty")
		}
	}
	allowed := c.mayManageCredentials(acl.Alter)
	for _, user := range order {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		if !allowed {
			r.ErrorCode, r.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr("Altering SCRAM credentials needs Alter on the cluster.")
			resp.Results = append(resp.Results, r)
			continue
		}
		if b, ok := bad[user]; ok {
			r.ErrorCode, r.ErrorMessage = b.code, kmsg.StringPtr(b.msg)
			resp.Results = append(resp.Results, r)
			continue
		}
		// A user's changes are written at once, or none of them (they
		// were checked above; what Apply refuses now is a deletion of
		// nothing, or a failed write).
		batch := changes[user]
		if err := c.b.creds.Apply(batch); err != nil {
			code, msg := kafkaerr.Code(err), err.Error()
			if errors.Is(err, security.ErrNoCredential) {
				code, msg = kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist"
			}
			r.ErrorCode, r.ErrorMessage = code, kmsg.StringPtr(msg)
		} else {
			c.lg.Info("SCRAM credentials altered", zap.String("user", user), zap.String("by", c.principal), zap.Int("changes", len(batch)))
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}
