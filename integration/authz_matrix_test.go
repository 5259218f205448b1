package integration

// T13 authorization matrix: every served API, issued raw (kmsg) by a
// principal of its own holding exactly the ACLs docs/SECURITY.md's
// authorization table gives it, by one missing each of them, and by one holding
// them with a matching DENY as well, over LITERAL, PREFIXED and "*"
// patterns for topics, groups and transactional ids. A cell observes
// the codes the table speaks of; the test fails with the list of every
// cell that saw something else (an unauthorized success included).
// Kafka's KafkaApis is the reference where the table defers to it.

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker"
)

const (
	opAll      = kmsg.ACLOperationAll
	opRead     = kmsg.ACLOperationRead
	opWrite    = kmsg.ACLOperationWrite
	opCreate   = kmsg.ACLOperationCreate
	opDelete   = kmsg.ACLOperationDelete
	opAlter    = kmsg.ACLOperationAlter
	opDescribe = kmsg.ACLOperationDescribe
	opCluster  = kmsg.ACLOperationClusterAction
	opDescCfg  = kmsg.ACLOperationDescribeConfigs
	opAltCfg   = kmsg.ACLOperationAlterConfigs
	opIdem     = kmsg.ACLOperationIdempotentWrite
)

// KIP-430: the operations each resource type reports, and the bit set
// of some of them.
var (
	topicOps   = []kmsg.ACLOperation{opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescCfg, opAltCfg}
	groupOps   = []kmsg.ACLOperation{opRead, opDescribe, opDelete, opDescCfg, opAltCfg}
	clusterOps = []kmsg.ACLOperation{opCreate, opCluster, opDescCfg, opAltCfg, opIdem, opAlter, opDescribe}
)

const opsOmitted = int32(-1 << 31) // INT32_MIN: not asked for (or not authorized)

func opBits(ops ...kmsg.ACLOperation) int32 {
	var b int32
	for _, op := range ops {
		b |= 1 << op
	}
	return b
}

func opsMinus(all []kmsg.ACLOperation, drop ...kmsg.ACLOperation) []kmsg.ACLOperation {
	return slices.DeleteFunc(slices.Clone(all), func(op kmsg.ACLOperation) bool { return slices.Contains(drop, op) })
}

// ops formats a KIP-430 bit set.
func ops(b int32) string {
	if b == opsOmitted {
		return "ops=omitted"
	}
	return fmt.Sprintf("ops=%#x", b)
}

func TestAuthzMatrix(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t, func(c *broker.Config) {
		c.Security["authorizer.class.name"] = "acl"
		c.Security["super.users"] = "User:admin"
	})
	runAuthzMatrix(t, e, authzCases())
}

// TestAuthzDisabledAclAPIs: without an authorizer the ACL APIs answer
// SECURITY_DISABLED (54), as Kafka with no authorizer.class.name.
func TestAuthzDisabledAclAPIs(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t)
	ctx := testContext(t)
	cl := e.client(t, e.sasl, nil, scram512("admin", adminPassword))
	cr := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", opRead, kmsg.ACLPermissionTypeAllow
	cr.Creations = append(cr.Creations, c)
	cresp, err := cr.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, cresp.Results, 1)
	require.Equal(t, kerr.SecurityDisabled.Code, cresp.Results[0].ErrorCode, "CreateAcls")

	dr := kmsg.NewPtrDescribeACLsRequest()
	dr.ResourceType, dr.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	dr.Operation, dr.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dresp, err := dr.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.SecurityDisabled.Code, dresp.ErrorCode, "DescribeAcls")

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	delResp, err := del.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, delResp.Results, 1)
	require.Equal(t, kerr.SecurityDisabled.Code, delResp.Results[0].ErrorCode, "DeleteAcls")

}

// TestAuthzDisabledOperations: KIP-430 with no authorizer: every
// operation the resource type supports, to anyone (here ANONYMOUS on
// PLAINTEXT).
func TestAuthzDisabledOperations(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t)
	ctx := testContext(t)
	anon := e.client(t, e.plain, nil, nil)
	group, topic := "authz-off-group", "authz-off-topic"
	ct, err := kadm.NewClient(anon).CreateTopic(ctx, 1, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, ct.Err)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = group, -1
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic, ot.TopicID = topic, [16]byte(ct.ID)
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Offset, op.LeaderEpoch = 1, -1
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	ocr, err := oc.RequestWith(ctx, anon)
	require.NoError(t, err)
	require.Zero(t, ocr.Topics[0].Partitions[0].ErrorCode)

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{group}, true
	dgr, err := dg.RequestWith(ctx, anon)
	require.NoError(t, err)
	require.Zero(t, dgr.Groups[0].ErrorCode)
	got := map[string]string{"DescribeGroups": ops(dgr.Groups[0].AuthorizedOperations)}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	dcr, err := dc.RequestWith(ctx, anon)
	require.NoError(t, err)
	got["DescribeCluster"] = ops(dcr.ClusterAuthorizedOperations)

	md := kmsg.NewPtrMetadataRequest() // v10: the last with cluster operations
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	md.IncludeClusterAuthorizedOperations, md.IncludeTopicAuthorizedOperations = true, true
	m, err := md.RequestWith(ctx, e.client(t, e.plain, nil, nil, kgo.MaxVersions(azCaps(map[int16]int16{3: 10}))))
	require.NoError(t, err)
	got["Metadata topic"], got["Metadata cluster"] = ops(m.Topics[0].AuthorizedOperations), ops(m.AuthorizedOperations)
	require.Equal(t, map[string]string{
		"DescribeGroups":   ops(opBits(groupOps...)),
		"DescribeCluster":  ops(opBits(clusterOps...)),
		"Metadata topic":   ops(opBits(topicOps...)),
		"Metadata cluster": ops(opBits(clusterOps...)),
	}, got)
}

// ---- setups (as the admin, a super user) ----

// initPID begins the cell's transactional id.
func initPID(x *azCtx) error {
	txn := x.c.X()
	resp, err := x.do(ltInitReq(&txn, -1, -1))
	if err != nil {
		return err
	}
	r := resp.(*kmsg.InitProducerIDResponse)
	if r.ErrorCode != 0 {
		return fmt.Errorf("InitProducerId: %s", codeName(r.ErrorCode))
	}
	x.c.pid, x.c.epoch = r.ProducerID, r.ProducerEpoch
	return nil
}

// txnWithPartition begins the cell's transaction and adds its topic's
// partition 0 to it.
func txnWithPartition(x *azCtx) error {
	if err := initPID(x); err != nil {
		return err
	}
	resp, err := x.do(ltAddPartitionsReq(x.c.X(), x.c.pid, x.c.epoch, x.c.T(), 0))
	if err != nil {
		return err
	}
	for _, rt := range resp.(*kmsg.AddPartitionsToTxnResponse).Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("AddPartitionsToTxn: %s", codeName(p.ErrorCode))
			}
		}
	}
	return nil
}

// txnWithGroup begins the cell's transaction and adds its group's
// offsets to it.
func txnWithGroup(x *azCtx) error {
	if err := initPID(x); err != nil {
		return err
	}
	resp, err := x.do(ltAddOffsetsReq(x.c.X(), x.c.pid, x.c.epoch, x.c.G()))
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode; code != 0 {
		return fmt.Errorf("AddOffsetsToTxn: %s", codeName(code))
	}
	return nil
}

func offsetCommitReq(x *azCtx, topics ...string) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = x.c.G(), -1
	for _, tp := range topics {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = tp, x.a.id(tp)
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, 1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// commitOffsets makes the cell's group (an empty classic group) with an
// offset for partition 0 of each of topics.
func commitOffsets(topics ...azRes) func(x *azCtx) error {
	return func(x *azCtx) error {
		var names []string
		for _, r := range topics {
			names = append(names, x.c.name(r))
		}
		resp, err := x.do(offsetCommitReq(x, names...))
		if err != nil {
			return err
		}
		for _, rt := range resp.(*kmsg.OffsetCommitResponse).Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 {
					return fmt.Errorf("OffsetCommit: %s", codeName(p.ErrorCode))
				}
			}
		}
		return nil
	}
}

// shareSession makes the cell's share group by opening (and closing) a
// share session on partition 0 of each of topics, as member "setup".
func shareSession(topics ...azRes) func(x *azCtx) error {
	return func(x *azCtx) error {
		for _, r := range topics {
			id := x.a.id(x.c.name(r))
			for _, epoch := range []int32{0, -1} {
				req := shareFetchReq(x.c.G(), "setup", id, epoch, 10, 0)
				if epoch == -1 {
					req.MaxBytes, req.MinBytes, req.MaxRecords, req.BatchSize = 0, 0, 0, 0
				}
				resp, err := x.do(req)
				if err != nil {
					return err
				}
				if code := resp.(*kmsg.ShareFetchResponse).ErrorCode; code != 0 {
					return fmt.Errorf("ShareFetch epoch %d: %s", epoch, codeName(code))
				}
			}
		}
		return nil
	}
}

// shareMember makes the cell's share group with the admin as a member
// subscribed to the cell's topic.
func shareMember(x *azCtx) error {
	code, err := shareHeartbeat(x)
	if err == nil && code != 0 {
		err = fmt.Errorf("ShareGroupHeartbeat: %s", codeName(code))
	}
	return err
}

func shareHeartbeat(x *azCtx) (int16, error) {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = x.c.G(), fmt.Sprintf("m%021d", x.c.n), 0
	req.SubscribedTopicNames = []string{x.c.T()}
	resp, err := x.do(req)
	if err != nil {
		return 0, err
	}
	return resp.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode, nil
}

func consumerHeartbeat(x *azCtx) (int16, error) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = x.c.G(), fmt.Sprintf("m%021d", x.c.n), 0
	req.RebalanceTimeoutMillis = 10000
	req.SubscribedTopicNames = []string{x.c.T()}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{} // empty, not null, on a join
	resp, err := x.do(req)
	if err != nil {
		return 0, err
	}
	return resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode, nil
}

// produceOne writes one record to partition 0 of the cell's topic and
// lets the cell's share group start at the earliest offset.
func produceOne(x *azCtx) error {
	c := x.c
	resp, err := x.do(produceRequest(c.T(), x.a.id(c.T()), 0, -1, plainBatch(time.Now().UnixMilli(), testRecord{Value: []byte("v")}).encode()))
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		return fmt.Errorf("Produce: %s", codeName(code))
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, c.G()
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = "share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("earliest")
	rr.Configs = append(rr.Configs, cfg)
	req.Resources = append(req.Resources, rr)
	ir, err := x.do(req)
	if err != nil {
		return err
	}
	if code := ir.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != 0 {
		return fmt.Errorf("IncrementalAlterConfigs: %s", codeName(code))
	}
	return nil
}

func allSetups(fs ...func(*azCtx) error) func(*azCtx) error {
	return func(x *azCtx) error {
		for _, f := range fs {
			if err := f(x); err != nil {
				return err
			}
		}
		return nil
	}
}

// ---- probe helpers ----

// listed reports whether name is among names, and any of names the
// cell may not describe (a listing must omit them).
func listed(x *azCtx, rt kmsg.ACLResourceType, own string, names []string) string {
	s := "hidden"
	if slices.Contains(names, own) {
		s = "listed"
	}
	var leaks []string
	for _, n := range names {
		if strings.HasPrefix(n, "az") && !x.c.allowed(rt, n, opDescribe) {
			leaks = append(leaks, n)
		}
	}
	if len(leaks) > 0 {
		s += " leaked " + strings.Join(leaks, " ")
	}
	return s
}

// label names a topic of the cell as a/b (anything else as itself).
func label(x *azCtx, topic string) string {
	switch topic {
	case x.c.T():
		return "a"
	case x.c.T2():
		return "b"
	}
	return topic
}

func describeConfigsProbe(rt kmsg.ConfigResourceType, name func(c *azCell) string) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = rt, name(x.c)
		req.Resources = append(req.Resources, rr)
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		return codes(resp.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode), nil
	}
}

func alterConfigsProbe(rt kmsg.ConfigResourceType, name func(c *azCell) string, key, value string) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		req := kmsg.NewPtrAlterConfigsRequest()
		req.ValidateOnly = true
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = rt, name(x.c)
		cfg := kmsg.NewAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = key, &value
		rr.Configs = append(rr.Configs, cfg)
		req.Resources = append(req.Resources, rr)
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		return codes(resp.(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode), nil
	}
}

func incrementalAlterProbe(rt kmsg.ConfigResourceType, name func(c *azCell) string, key, value string) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = true
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = rt, name(x.c)
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = key, kmsg.IncrementalAlterConfigOpSet, &value
		rr.Configs = append(rr.Configs, cfg)
		req.Resources = append(req.Resources, rr)
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		return codes(resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode), nil
	}
}

func cellT(c *azCell) string    { return c.T() }
func cellG(c *azCell) string    { return c.G() }
func brokerZero(*azCell) string { return "0" }

func findCoordinatorProbe(typ int8, key func(x *azCtx) string) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = typ
		k := key(x)
		req.CoordinatorKey, req.CoordinatorKeys = k, []string{k}
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		if r.Version < 4 {
			return codes(r.ErrorCode), nil
		}
		return codes(r.Coordinators[0].ErrorCode), nil
	}
}

func metadataProbe(auto bool) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(x.c.T())
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = auto
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		return codes(resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode), nil
	}
}

// ---- the matrix ----

// authzCases is the table, API by API. Each case's comment says what
// it asserts beyond the table's line (or where Kafka is the reference).
func authzCases() []*azCase {
	T, T2, G, X, C := azTopic, azTopic2, azGroup, azTxn, azCluster
	litPre := []azPat{azLit, azPre}
	allow, deny := azAllow, azDeny
	return []*azCase{
		{
			api: "0 Produce", topics: 1,
			probe: func(x *azCtx) (string, error) {
				c := x.c
				resp, err := x.do(produceRequest(c.T(), x.a.id(c.T()), 0, -1, plainBatch(time.Now().UnixMilli(), testRecord{Value: []byte("v")}).encode()))
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode), nil
			},
			needs: []azNeed{{res: T, op: opWrite, denied: "29"}},
			ok:    "0",
			// Hosts: an ACL applies from its host or "*" only (the
			// client is 127.0.0.1).
			extra: []azVariant{
				{"ALLOW from 127.0.0.1", []azACL{{res: T, op: opWrite, pat: azLit, host: "127.0.0.1"}}, "0"},
				{"ALLOW from another host", []azACL{{res: T, op: opWrite, pat: azPre, host: "10.9.9.9"}}, "29"},
				{"DENY from another host does not apply", []azACL{allow(T, opWrite, azLit), {res: T, op: opAll, pat: azAny, deny: true, host: "10.9.9.9"}}, "0"},
				{"DENY from 127.0.0.1 applies", []azACL{allow(T, opWrite, azAny), {res: T, op: opWrite, pat: azLit, deny: true, host: "127.0.0.1"}}, "29"},
			},
		},
		{
			// User:ANONYMOUS (PLAINTEXT, no ACL): refused like anyone.
			api: "0 Produce anonymous", topics: 1, anonymous: true,
			probe: func(x *azCtx) (string, error) {
				c := x.c
				resp, err := x.do(produceRequest(c.T(), x.a.id(c.T()), 0, -1, plainBatch(time.Now().UnixMilli(), testRecord{Value: []byte("v")}).encode()))
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode), nil
			},
			extra: []azVariant{{"no ACL", nil, "29"}},
		},
		{
			api: "3 Metadata all topics anonymous", topics: 1, anonymous: true,
			probe: func(x *azCtx) (string, error) {
				resp, err := x.do(kmsg.NewPtrMetadataRequest())
				if err != nil {
					return "", err
				}
				var names []string
				for _, t := range resp.(*kmsg.MetadataResponse).Topics {
					names = append(names, *t.Topic)
				}
				return listed(x, kmsg.ACLResourceTypeTopic, x.c.T(), names), nil
			},
			extra: []azVariant{{"no ACL", nil, "hidden"}},
		},
		{
			api: "30 CreateAcls anonymous", anonymous: true,
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrCreateACLsRequest()
				cr := x.c.creation(azAllow(azCluster, opAll, azLit))
				req.Creations = append(req.Creations, cr)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.CreateACLsResponse).Results[0].ErrorCode), nil
			},
			extra: []azVariant{{"no ACL: may not grant itself All", nil, "31"}},
		},
		{
			// A transactional batch of a transaction the admin began
			// (partition added): Write on the transactional id first
			// (every partition 53), then Write on the topic.
			api: "0 Produce transactional", topics: 1, setup: txnWithPartition,
			probe: func(x *azCtx) (string, error) {
				c := x.c
				resp, err := x.do(ltTxnProduceReq(c.X(), c.T(), x.a.id(c.T()), 0, ltBatch(c.pid, c.epoch, 0, true, "v")))
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode), nil
			},
			needs: []azNeed{{res: X, op: opWrite, denied: "53"}, {res: T, op: opWrite, denied: "29"}},
			ok:    "0",
		},
		{
			api: "1 Fetch v12 (names)", topics: 1, caps: map[int16]int16{1: 12},
			probe: fetchProbe(-1),
			needs: []azNeed{{res: T, op: opRead, denied: "29"}},
			ok:    "0",
		},
		{
			api: "1 Fetch v13 (topic ids)", topics: 1,
			probe: fetchProbe(-1),
			needs: []azNeed{{res: T, op: opRead, denied: "29"}},
			ok:    "0",
		},
		{
			// A follower's fetch (replica id 1) needs ClusterAction,
			// not Read on the topic; without it every partition 29.
			api: "1 Fetch replica", topics: 1,
			probe: fetchProbe(1),
			needs: []azNeed{{res: C, op: opCluster, denied: "29"}},
			ok:    "0",
			extra: []azVariant{{"Read on the topic is not enough", []azACL{allow(T, opRead, azLit)}, "29"}},
		},
		{
			api: "2 ListOffsets", topics: 1,
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrListOffsetsRequest()
				req.ReplicaID = -1
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = x.c.T()
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode), nil
			},
			needs: []azNeed{{res: T, op: opDescribe, denied: "29"}},
			ok:    "0",
			extra: []azVariant{{"Read implies Describe", []azACL{allow(T, opRead, azPre)}, "0"}},
		},
		{
			api: "3 Metadata named topic", topics: 1,
			probe: metadataProbe(false),
			needs: []azNeed{{res: T, op: opDescribe, denied: "29"}},
			ok:    "0",
		},
		{
			// Authorization before existence: a topic that does not
			// exist is 29 to who may not describe it, 3 to who may.
			api:   "3 Metadata named missing topic",
			probe: metadataProbe(false),
			needs: []azNeed{{res: T, op: opDescribe, denied: "29"}},
			ok:    "3",
		},
		{
			// Auto-creation needs Create on the topic (or cluster).
			api:   "3 Metadata auto-create",
			probe: metadataProbe(true),
			needs: []azNeed{{res: T, op: opDescribe, denied: "29"}, {res: T, op: opCreate, denied: "29"}},
			ok:    "0",
		},
		{
			api:   "3 Metadata auto-create (Create on Cluster)",
			probe: metadataProbe(true),
			needs: []azNeed{{res: T, op: opDescribe, denied: "29"}, {res: C, op: opCreate, denied: "29"}},
			ok:    "0",
		},
		{
			// All topics: the cell's topic is listed only if it may
			// describe it, and no topic it may not describe is listed
			// (topic "b" exists with no ACL).
			api: "3 Metadata all topics", topics: 1, topic2: true,
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrMetadataRequest()
				req.Topics = nil
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				var names []string
				for _, t := range resp.(*kmsg.MetadataResponse).Topics {
					names = append(names, *t.Topic)
				}
				return listed(x, kmsg.ACLResourceTypeTopic, x.c.T(), names), nil
			},
			needs: []azNeed{{res: T, op: opDescribe, denied: "hidden"}},
			ok:    "listed",
		},
		{
			// KIP-430 in Metadata v10: the named topic's operations
			// (omitted for a topic the caller may not describe), and
			// the cluster's: Kafka (handleTopicMetadataRequest) reports
			// them only to who may describe the cluster, 0 otherwise.
			api: "3 Metadata v10 authorized operations", topics: 1, caps: map[int16]int16{3: 10},
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrMetadataRequest()
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(x.c.T())
				req.Topics = append(req.Topics, rt)
				req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = true, true
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				r := resp.(*kmsg.MetadataResponse)
				return fmt.Sprintf("%d topic %s cluster %s", r.Topics[0].ErrorCode, ops(r.Topics[0].AuthorizedOperations), ops(r.AuthorizedOperations)), nil
			},
			extra: []azVariant{
				{"Describe topic", []azACL{allow(T, opDescribe, azLit)},
					"0 topic " + ops(opBits(opDescribe)) + " cluster " + ops(0)},
				{"Read+Write topic, Describe cluster", []azACL{allow(T, opRead, azPre), allow(T, opWrite, azLit), allow(C, opDescribe, azLit)},
					"0 topic " + ops(opBits(opRead, opWrite, opDescribe)) + " cluster " + ops(opBits(opDescribe))},
				{"All topic less DENY Write, Alter cluster", []azACL{allow(T, opAll, azAny), deny(T, opWrite, azLit), allow(C, opAlter, azLit)},
					"0 topic " + ops(opBits(opsMinus(topicOps, opWrite)...)) + " cluster " + ops(opBits(opAlter, opDescribe))},
				{"AlterConfigs topic (no Describe), All cluster", []azACL{allow(T, opAltCfg, azPre), allow(C, opAll, azLit)},
					"29 topic " + ops(opsOmitted) + " cluster " + ops(opBits(clusterOps...))},
				{"Describe topic, ClusterAction cluster (no Describe)", []azACL{allow(T, opDescribe, azAny), allow(C, opCluster, azLit)},
					"0 topic " + ops(opBits(opDescribe)) + " cluster " + ops(0)},
			},
		},
		{
			// A simple (generation -1) commit to the cell's group.
			api: "8 OffsetCommit", topics: 1,
			probe: func(x *azCtx) (string, error) {
				resp, err := x.do(offsetCommitReq(x, x.c.T()))
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode), nil
			},
			needs: []azNeed{{res: G, op: opRead, denied: "30"}, {res: T, op: opRead, denied: "29"}},
			ok:    "0",
		},
		{
			api: "8 OffsetCommit v9 (names)", topics: 1, caps: map[int16]int16{8: 9},
			probe: func(x *azCtx) (string, error) {
				resp, err := x.do(offsetCommitReq(x, x.c.T()))
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode), nil
			},
			needs: []azNeed{{res: G, op: opRead, denied: "30"}, {res: T, op: opRead, denied: "29"}},
			ok:    "0",
		},
		{
			// v8+ (one group): group error, then partition errors; a
			// refused group has no partitions ("-"): Kafka's
			// OffsetFetchResponse.groupError lists topics only below
			// v2 (TOP_LEVEL_ERROR_AND_NULL_TOPICS_MIN_VERSION).
			api: "9 OffsetFetch named", topics: 1, setup: commitOffsets(T),
			probe: offsetFetchProbe(true),
			needs: []azNeed{{res: G, op: opDescribe, denied: "30 -"}, {res: T, op: opDescribe, denied: "0 a:29"}},
			ok:    "0 a:0",
		},
		{
			// All partitions: topics the cell may not describe are
			// left out (b has an offset too).
			api: "9 OffsetFetch all", topics: 1, topic2: true, setup: commitOffsets(T, T2),
			probe: offsetFetchProbe(false),
			needs: []azNeed{{res: G, op: opDescribe, denied: "30 -"}, {res: T, op: opDescribe, pats: litPre, denied: "0 -"}},
			ok:    "0 a:0",
		},
		{
			// v7: the top-level error, and no partitions either
			// (Kafka; the table says partitions too below v8, which
			// is Kafka's v1 only; see the report).
			api: "9 OffsetFetch v7 (one group)", topics: 1, setup: commitOffsets(T), caps: map[int16]int16{9: 7},
			probe: offsetFetchProbe(true),
			needs: []azNeed{{res: G, op: opDescribe, denied: "30 -"}, {res: T, op: opDescribe, denied: "0 a:29"}},
			ok:    "0 a:0",
		},
		{
			api:   "10 FindCoordinator group",
			probe: findCoordinatorProbe(0, func(x *azCtx) string { return x.c.G() }),
			needs: []azNeed{{res: G, op: opDescribe, denied: "30"}},
			ok:    "0",
		},
		{
			api: "10 FindCoordinator v3 group", caps: map[int16]int16{10: 3},
			probe: findCoordinatorProbe(0, func(x *azCtx) string { return x.c.G() }),
			needs: []azNeed{{res: G, op: opDescribe, denied: "30"}},
			ok:    "0",
		},
		{
			api:   "10 FindCoordinator transaction",
			probe: findCoordinatorProbe(1, func(x *azCtx) string { return x.c.X() }),
			needs: []azNeed{{res: X, op: opDescribe, denied: "53"}},
			ok:    "0",
		},
		{
			api: "10 FindCoordinator share", topics: 1,
			probe: findCoordinatorProbe(2, func(x *azCtx) string {
				id := x.a.id(x.c.T())
				return fmt.Sprintf("%s:%s:0", x.c.G(), kmsgUUID(id))
			}),
			needs: []azNeed{{res: C, op: opCluster, denied: "31"}},
			ok:    "0",
		},
		{
			// A first join without a member id: MEMBER_ID_REQUIRED is
			// the normal answer.
			api: "11 JoinGroup",
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrJoinGroupRequest()
				req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = x.c.G(), 10000, 10000, "consumer"
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name, p.Metadata = "range", (&kmsg.ConsumerMemberMetadata{Topics: []string{"x"}}).AppendTo(nil)
				req.Protocols = append(req.Protocols, p)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.JoinGroupResponse).ErrorCode), nil
			},
			needs: []azNeed{{res: G, op: opRead, denied: "30"}},
			ok:    codes(kerr.MemberIDRequired.Code),
		},
		{
			// Heartbeat, LeaveGroup, SyncGroup from a member the group
			// does not know: UNKNOWN_MEMBER_ID is the normal answer
			// (LeaveGroup: top-level, then the member's; a refused
			// group has no members).
			api: "12 Heartbeat",
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrHeartbeatRequest()
				req.Group, req.Generation, req.MemberID = x.c.G(), 1, "nobody"
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.HeartbeatResponse).ErrorCode), nil
			},
			needs: []azNeed{{res: G, op: opRead, denied: "30"}},
			ok:    codes(kerr.UnknownMemberID.Code),
		},
		{
			api: "13 LeaveGroup",
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrLeaveGroupRequest()
				req.Group = x.c.G()
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = "nobody"
				req.Members = append(req.Members, m)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				r := resp.(*kmsg.LeaveGroupResponse)
				s := codes(r.ErrorCode)
				for _, m := range r.Members {
					s += " " + codes(m.ErrorCode)
				}
				return s, nil
			},
			needs: []azNeed{{res: G, op: opRead, denied: "30"}},
			ok:    "0 " + codes(kerr.UnknownMemberID.Code),
		},
		{
			api: "14 SyncGroup",
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrSyncGroupRequest()
				req.Group, req.Generation, req.MemberID = x.c.G(), 1, "nobody"
				req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.SyncGroupResponse).ErrorCode), nil
			},
			needs: []azNeed{{res: G, op: opRead, denied: "30"}},
			ok:    codes(kerr.UnknownMemberID.Code),
		},
		{
			api: "15 DescribeGroups", topics: 1, setup: commitOffsets(T),
			probe: describeGroupsProbe(false),
			needs: []azNeed{{res: G, op: opDescribe, denied: "30"}},
			ok:    "0",
		},
		{
			// KIP-430: the group's operations when asked; an
			// unauthorized group's are omitted.
			api: "15 DescribeGroups authorized operations", topics: 1, setup: commitOffsets(T),
			probe: describeGroupsProbe(true),
			extra: []azVariant{
				{"Describe", []azACL{allow(G, opDescribe, azLit)}, "0 " + ops(opBits(opDescribe))},
				{"Read implies Describe", []azACL{allow(G, opRead, azPre)}, "0 " + ops(opBits(opRead, opDescribe))},
				{"All", []azACL{allow(G, opAll, azAny)}, "0 " + ops(opBits(groupOps...))},
				{"All less DENY Delete", []azACL{allow(G, opAll, azLit), deny(G, opDelete, azPre)}, "0 " + ops(opBits(opsMinus(groupOps, opDelete)...))},
				{"AlterConfigs (no Describe)", []azACL{allow(G, opAltCfg, azLit)}, "30 " + ops(opsOmitted)},
			},
		},
		{
			// The cell's group exists (an offset committed); a listing
			// shows it only to who may describe it, and no group the
			// cell may not describe.
			api: "16 ListGroups", topics: 1, setup: commitOffsets(T),
			probe: listGroupsProbe,
			needs: []azNeed{{res: G, op: opDescribe, denied: "hidden"}},
			ok:    "listed",
		},
		{
			api: "16 ListGroups (Describe on Cluster)", topics: 1, setup: commitOffsets(T),
			probe: listGroupsProbe,
			needs: []azNeed{{res: C, op: opDescribe, denied: "hidden"}},
			ok:    "listed",
		},
		{
			// error/config error: configs in the answer need
			// DescribeConfigs on the topic (TopicConfigErrorCode 29).
			api:   "19 CreateTopics",
			probe: createTopicsProbe,
			needs: []azNeed{{res: T, op: opCreate, denied: "29/0"}, {res: T, op: opDescCfg, denied: "0/29"}},
			ok:    "0/0",
		},
		{
			api:   "19 CreateTopics (Create on Cluster)",
			probe: createTopicsProbe,
			needs: []azNeed{{res: C, op: opCreate, denied: "29/0"}, {res: T, op: opDescCfg, denied: "0/29"}},
			ok:    "0/0",
		},
		{
			api: "20 DeleteTopics", topics: 1,
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrDeleteTopicsRequest()
				req.TimeoutMillis = 10000
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic = kmsg.StringPtr(x.c.T())
				req.Topics, req.TopicNames = append(req.Topics, rt), []string{x.c.T()}
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode), nil
			},
			needs: []azNeed{{res: T, op: opDelete, denied: "29"}},
			ok:    "0",
		},
		{
			api: "21 DeleteRecords", topics: 1,
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrDeleteRecordsRequest()
				req.TimeoutMillis = 10000
				rt := kmsg.NewDeleteRecordsRequestTopic()
				rt.Topic = x.c.T()
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Partition, rp.Offset = 0, 0
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode), nil
			},
			needs: []azNeed{{res: T, op: opDelete, denied: "29"}},
			ok:    "0",
		},
		{
			api:   "22 InitProducerId transactional",
			probe: initPIDProbe(true),
			needs: []azNeed{{res: X, op: opWrite, denied: "53"}},
			ok:    "0",
		},
		{
			api:   "22 InitProducerId idempotent (IdempotentWrite)",
			probe: initPIDProbe(false),
			needs: []azNeed{{res: C, op: opIdem, denied: "31"}},
			ok:    "0",
		},
		{
			// KIP-679: Write on any topic (authorizeByResourceType:
			// an ALLOW counts unless a DENY at least as broad covers
			// it). The topic need not exist.
			api: "22 InitProducerId idempotent (Write on a topic)", byType: true,
			probe: initPIDProbe(false),
			needs: []azNeed{{res: T, op: opWrite, denied: "31"}},
			ok:    "0",
			extra: []azVariant{
				{"Write on another resource type only", []azACL{allow(G, opRead, azAny), allow(X, opDescribe, azAny)}, "31"},
				{"ALLOW PREFIXED, DENY LITERAL under it", []azACL{allow(T, opWrite, azPre), deny(T, opWrite, azLit)}, "0"},
				{"ALLOW LITERAL, DENY PREFIXED over it", []azACL{allow(T, opWrite, azLit), deny(T, opWrite, azPre)}, "31"},
				{"ALLOW *, DENY LITERAL", []azACL{allow(T, opWrite, azAny), deny(T, opWrite, azLit)}, "0"},
				{"ALLOW LITERAL, DENY *", []azACL{allow(T, opWrite, azLit), deny(T, opAll, azAny)}, "31"},
			},
		},
		{
			// Kafka (KafkaApis.handleOffsetForLeaderEpochRequest, KIP-320)
			// lets ClusterAction stand for Describe on every topic,
			// whatever the replica id; the table does not say so.
			api: "23 OffsetForLeaderEpoch", topics: 1,
			probe: offsetForLeaderEpochProbe(-1),
			needs: []azNeed{{res: T, op: opDescribe, denied: "29"}},
			ok:    "0",
			extra: []azVariant{{"ClusterAction instead of Describe", []azACL{allow(C, opCluster, azLit)}, "0"}},
		},
		{
			// From a replica: ClusterAction suffices (Kafka:
			// ClusterAction on the cluster or Describe on the topic).
			api: "23 OffsetForLeaderEpoch replica", topics: 1,
			probe: offsetForLeaderEpochProbe(1),
			needs: []azNeed{{res: C, op: opCluster, denied: "29"}},
			ok:    "0",
		},
		{
			// v3: "a" and "b" added together; a topic without Write is
			// 29, the other then 55 (OPERATION_NOT_ATTEMPTED).
			api: "24 AddPartitionsToTxn v3", topics: 1, topic2: true, setup: initPID, caps: map[int16]int16{24: 3},
			probe: func(x *azCtx) (string, error) {
				c := x.c
				req := ltAddPartitionsReq(c.X(), c.pid, c.epoch, c.T(), 0)
				rt := kmsg.NewAddPartitionsToTxnRequestTopic()
				rt.Topic, rt.Partitions = c.T2(), []int32{0}
				req.Topics = append(req.Topics, rt)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				got := map[string]int16{}
				for _, rt := range resp.(*kmsg.AddPartitionsToTxnResponse).Topics {
					for _, p := range rt.Partitions {
						got[label(x, rt.Topic)] = p.ErrorCode
					}
				}
				return fmt.Sprintf("a:%d b:%d", got["a"], got["b"]), nil
			},
			needs: []azNeed{
				{res: X, op: opWrite, denied: "a:53 b:53"},
				{res: T, op: opWrite, pats: litPre, denied: "a:29 b:55"},
				{res: T2, op: opWrite, pats: litPre, denied: "a:55 b:29"},
			},
			ok: "a:0 b:0",
		},
		{
			// v4+ (brokers verifying a transaction): ClusterAction,
			// else top-level 31.
			api: "24 AddPartitionsToTxn v5 verify-only", topics: 1, setup: txnWithPartition,
			probe: addPartitionsV5Probe(true),
			needs: []azNeed{{res: C, op: opCluster, denied: "31"}},
			ok:    "0",
			extra: []azVariant{{"Write on the transactional id and topic is not enough",
				[]azACL{allow(X, opWrite, azLit), allow(T, opWrite, azLit)}, "31"}},
		},
		{
			// Not verify-only: Kafka (handleAddPartitionsToTxnRequest)
			// checks ClusterAction for any v4+ request ("newer
			// versions of the request should only come from other
			// brokers"), before the batch's flags.
			api: "24 AddPartitionsToTxn v5", topics: 1, setup: initPID,
			probe: addPartitionsV5Probe(false),
			needs: []azNeed{{res: C, op: opCluster, denied: "31"}},
			ok:    "0",
			extra: []azVariant{{"Write on the transactional id and topic is not enough",
				[]azACL{allow(X, opWrite, azLit), allow(T, opWrite, azLit)}, "31"}},
		},
		{
			api: "25 AddOffsetsToTxn", setup: initPID,
			probe: func(x *azCtx) (string, error) {
				c := x.c
				resp, err := x.do(ltAddOffsetsReq(c.X(), c.pid, c.epoch, c.G()))
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode), nil
			},
			needs: []azNeed{{res: X, op: opWrite, denied: "53"}, {res: G, op: opRead, denied: "30"}},
			ok:    "0",
		},
		{
			// Aborting the transaction the admin began.
			api: "26 EndTxn", topics: 1, setup: txnWithPartition,
			probe: func(x *azCtx) (string, error) {
				c := x.c
				resp, err := x.do(ltEndTxnReq(c.X(), c.pid, c.epoch, false))
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.EndTxnResponse).ErrorCode), nil
			},
			needs: []azNeed{{res: X, op: opWrite, denied: "53"}},
			ok:    "0",
		},
		{
			api: "28 TxnOffsetCommit", topics: 1, setup: txnWithGroup,
			probe: func(x *azCtx) (string, error) {
				c := x.c
				resp, err := x.do(ltTxnOffsetCommitReq(c.X(), c.pid, c.epoch, c.G(), -1, "", c.T(), map[int32]int64{0: 1}))
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode), nil
			},
			needs: []azNeed{{res: X, op: opWrite, denied: "53"}, {res: G, op: opRead, denied: "30"}, {res: T, op: opRead, denied: "29"}},
			ok:    "0",
		},
		{
			api: "29 DescribeAcls",
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrDescribeACLsRequest()
				req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				req.Principal = kmsg.StringPtr(x.c.principal())
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				r := resp.(*kmsg.DescribeACLsResponse)
				n := 0
				for _, res := range r.Resources {
					n += len(res.ACLs)
				}
				if r.ErrorCode == 0 && n == 0 {
					return "0 but none of the cell's own bindings", nil
				}
				return codes(r.ErrorCode), nil
			},
			needs: []azNeed{{res: C, op: opDescribe, denied: "31"}},
			ok:    "0",
			extra: []azVariant{{"Alter implies Describe", []azACL{allow(C, opAlter, azLit)}, "0"}},
		},
		{
			api: "30 CreateAcls",
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrCreateACLsRequest()
				cr := x.c.creation(azAllow(azTopic2, opRead, azLit))
				cr.Principal = "User:nobody-" + x.c.user()
				req.Creations = append(req.Creations, cr)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.CreateACLsResponse).Results[0].ErrorCode), nil
			},
			needs: []azNeed{{res: C, op: opAlter, denied: "31"}},
			ok:    "0",
		},
		{
			api: "31 DeleteAcls",
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrDeleteACLsRequest()
				f := kmsg.NewDeleteACLsRequestFilter()
				f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(x.c.T2()), kmsg.ACLResourcePatternTypeLiteral
				f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				req.Filters = append(req.Filters, f)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.DeleteACLsResponse).Results[0].ErrorCode), nil
			},
			needs: []azNeed{{res: C, op: opAlter, denied: "31"}},
			ok:    "0",
		},
		{
			api: "32 DescribeConfigs topic", topics: 1,
			probe: describeConfigsProbe(kmsg.ConfigResourceTypeTopic, cellT),
			needs: []azNeed{{res: T, op: opDescCfg, denied: "29"}},
			ok:    "0",
			extra: []azVariant{{"AlterConfigs implies DescribeConfigs", []azACL{allow(T, opAltCfg, azPre)}, "0"}},
		},
		{
			api:   "32 DescribeConfigs broker",
			probe: describeConfigsProbe(kmsg.ConfigResourceTypeBroker, brokerZero),
			needs: []azNeed{{res: C, op: opDescCfg, denied: "31"}},
			ok:    "0",
		},
		{
			// Shoal has no loggers to describe (INVALID_REQUEST), but
			// authorization comes first.
			api:   "32 DescribeConfigs broker logger",
			probe: describeConfigsProbe(kmsg.ConfigResourceTypeBrokerLogger, brokerZero),
			needs: []azNeed{{res: C, op: opDescCfg, denied: "31"}},
			ok:    codes(kerr.InvalidRequest.Code),
		},
		{
			api:   "32 DescribeConfigs group",
			probe: describeConfigsProbe(kmsg.ConfigResourceTypeGroupConfig, cellG),
			needs: []azNeed{{res: G, op: opDescCfg, denied: "30"}},
			ok:    "0",
		},
		{
			api: "33 AlterConfigs topic", topics: 1,
			probe: alterConfigsProbe(kmsg.ConfigResourceTypeTopic, cellT, "retention.ms", "3600000"),
			needs: []azNeed{{res: T, op: opAltCfg, denied: "29"}},
			ok:    "0",
		},
		{
			api:   "33 AlterConfigs broker",
			probe: alterConfigsProbe(kmsg.ConfigResourceTypeBroker, brokerZero, "log.retention.ms", "3600000"),
			needs: []azNeed{{res: C, op: opAltCfg, denied: "31"}},
			ok:    "0",
		},
		{
			api:   "33 AlterConfigs group",
			probe: alterConfigsProbe(kmsg.ConfigResourceTypeGroupConfig, cellG, "share.auto.offset.reset", "earliest"),
			needs: []azNeed{{res: G, op: opAltCfg, denied: "30"}},
			ok:    "0",
		},
		{
			api: "44 IncrementalAlterConfigs topic", topics: 1,
			probe: incrementalAlterProbe(kmsg.ConfigResourceTypeTopic, cellT, "retention.ms", "3600000"),
			needs: []azNeed{{res: T, op: opAltCfg, denied: "29"}},
			ok:    "0",
		},
		{
			api:   "44 IncrementalAlterConfigs broker",
			probe: incrementalAlterProbe(kmsg.ConfigResourceTypeBroker, brokerZero, "log.retention.ms", "3600000"),
			needs: []azNeed{{res: C, op: opAltCfg, denied: "31"}},
			ok:    "0",
		},
		{
			api:   "44 IncrementalAlterConfigs group",
			probe: incrementalAlterProbe(kmsg.ConfigResourceTypeGroupConfig, cellG, "share.auto.offset.reset", "earliest"),
			needs: []azNeed{{res: G, op: opAltCfg, denied: "30"}},
			ok:    "0",
		},
		{
			// Without Describe on the cluster: top-level 31 and no
			// results.
			api: "35 DescribeLogDirs",
			probe: func(x *azCtx) (string, error) {
				resp, err := x.do(kmsg.NewPtrDescribeLogDirsRequest())
				if err != nil {
					return "", err
				}
				r := resp.(*kmsg.DescribeLogDirsResponse)
				return fmt.Sprintf("%d dirs=%v", r.ErrorCode, len(r.Dirs) > 0), nil
			},
			needs: []azNeed{{res: C, op: opDescribe, denied: "31 dirs=false"}},
			ok:    "0 dirs=true",
		},
		{
			api: "37 CreatePartitions", topics: 1,
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrCreatePartitionsRequest()
				req.TimeoutMillis = 10000
				rt := kmsg.NewCreatePartitionsRequestTopic()
				rt.Topic, rt.Count = x.c.T(), 2
				req.Topics = append(req.Topics, rt)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode), nil
			},
			needs: []azNeed{{res: T, op: opAlter, denied: "29"}},
			ok:    "0",
		},
		{
			api: "43 ElectLeaders", topics: 1,
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrElectLeadersRequest()
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic, rt.Partitions = x.c.T(), []int32{0}
				req.Topics = append(req.Topics, rt)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				r := resp.(*kmsg.ElectLeadersResponse)
				return codes(r.ErrorCode, r.Topics[0].Partitions[0].ErrorCode), nil
			},
			// A single node's only replica leads: ELECTION_NOT_NEEDED.
			needs: []azNeed{{res: C, op: opAlter, denied: "31,31"}},
			ok:    "0,84",
		},
		{
			api: "42 DeleteGroups", topics: 1, setup: commitOffsets(T),
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrDeleteGroupsRequest()
				req.Groups = []string{x.c.G()}
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode), nil
			},
			needs: []azNeed{{res: G, op: opDelete, denied: "30"}},
			ok:    "0",
		},
		{
			// top-level/partition; an unauthorized group has no
			// partitions ("-").
			api: "47 OffsetDelete", topics: 1, setup: commitOffsets(T),
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrOffsetDeleteRequest()
				req.Group = x.c.G()
				rt := kmsg.NewOffsetDeleteRequestTopic()
				rt.Topic = x.c.T()
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rp.Partition = 0
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				r := resp.(*kmsg.OffsetDeleteResponse)
				s := codes(r.ErrorCode) + "/-"
				if len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 {
					s = codes(r.ErrorCode, r.Topics[0].Partitions[0].ErrorCode)
					s = strings.Replace(s, ",", "/", 1)
				}
				return s, nil
			},
			needs: []azNeed{{res: G, op: opDelete, denied: "30/-"}, {res: T, op: opRead, denied: "0/29"}},
			ok:    "0/0",
		},
		{
			api: "48 DescribeClientQuotas",
			probe: func(x *azCtx) (string, error) {
				resp, err := x.do(kmsg.NewPtrDescribeClientQuotasRequest())
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.DescribeClientQuotasResponse).ErrorCode), nil
			},
			needs: []azNeed{{res: C, op: opDescCfg, denied: "31"}},
			ok:    "0",
			extra: []azVariant{{"AlterConfigs implies DescribeConfigs", []azACL{allow(C, opAltCfg, azLit)}, "0"}},
		},
		{
			api: "49 AlterClientQuotas",
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrAlterClientQuotasRequest()
				req.ValidateOnly = true
				en := kmsg.NewAlterClientQuotasRequestEntry()
				ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
				ent.Type, ent.Name = "user", kmsg.StringPtr(x.c.user())
				op := kmsg.NewAlterClientQuotasRequestEntryOp()
				op.Key, op.Value = "producer_byte_rate", 1<<20
				en.Entity, en.Ops = append(en.Entity, ent), append(en.Ops, op)
				req.Entries = append(req.Entries, en)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode), nil
			},
			needs: []azNeed{{res: C, op: opAltCfg, denied: "31"}},
			ok:    "0",
		},
		{
			api: "50 DescribeUserScramCredentials",
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
				u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
				u.Name = x.c.user()
				req.Users = append(req.Users, u)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode), nil
			},
			needs: []azNeed{{res: C, op: opDescribe, denied: "31"}},
			ok:    "0",
		},
		{
			api: "51 AlterUserScramCredentials",
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
				up.Name, up.Mechanism, up.Iterations = x.c.user()+"-other", 2, 4096
				up.Salt, up.SaltedPassword = []byte("salt"), make([]byte, 64)
				req.Upsertions = append(req.Upsertions, up)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode), nil
			},
			needs: []azNeed{{res: C, op: opAlter, denied: "31"}},
			ok:    "0",
		},
		{
			// No check.
			api:   "60 DescribeCluster",
			probe: describeClusterProbe(false),
			extra: []azVariant{{"no ACL", nil, "0 " + ops(opsOmitted)}},
		},
		{
			// KIP-430 cluster operations when asked. Kafka
			// (AuthHelper.computeDescribeClusterResponse) gives 0 to
			// who may not describe the cluster, whatever else it may
			// do; the table's line does not say so (see the report).
			api:   "60 DescribeCluster authorized operations",
			probe: describeClusterProbe(true),
			extra: []azVariant{
				{"no ACL", nil, "0 " + ops(0)},
				{"Describe", []azACL{allow(C, opDescribe, azLit)}, "0 " + ops(opBits(opDescribe))},
				{"Alter implies Describe", []azACL{allow(C, opAlter, azLit)}, "0 " + ops(opBits(opAlter, opDescribe))},
				{"All", []azACL{allow(C, opAll, azLit)}, "0 " + ops(opBits(clusterOps...))},
				{"All less DENY IdempotentWrite", []azACL{allow(C, opAll, azLit), deny(C, opIdem, azLit)},
					"0 " + ops(opBits(opsMinus(clusterOps, opIdem)...))},
				{"IdempotentWrite only: no Describe, no bits", []azACL{allow(C, opIdem, azLit)}, "0 " + ops(0)},
			},
		},
		{
			api: "61 DescribeProducers", topics: 1,
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrDescribeProducersRequest()
				rt := kmsg.NewDescribeProducersRequestTopic()
				rt.Topic, rt.Partitions = x.c.T(), []int32{0}
				req.Topics = append(req.Topics, rt)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode), nil
			},
			needs: []azNeed{{res: T, op: opRead, denied: "29"}},
			ok:    "0",
		},
		{
			// code and the topics listed: those the cell may not
			// describe are left out.
			api: "65 DescribeTransactions", topics: 1, setup: txnWithPartition,
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrDescribeTransactionsRequest()
				req.TransactionalIDs = []string{x.c.X()}
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				st := resp.(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
				var ts []string
				for _, tt := range st.Topics {
					ts = append(ts, label(x, tt.Topic))
				}
				return fmt.Sprintf("%d [%s]", st.ErrorCode, strings.Join(ts, " ")), nil
			},
			needs: []azNeed{{res: X, op: opDescribe, denied: "53 []"}, {res: T, op: opDescribe, denied: "0 []"}},
			ok:    "0 [a]",
		},
		{
			api: "66 ListTransactions", setup: initPID,
			probe: func(x *azCtx) (string, error) {
				resp, err := x.do(kmsg.NewPtrListTransactionsRequest())
				if err != nil {
					return "", err
				}
				r := resp.(*kmsg.ListTransactionsResponse)
				var ids []string
				for _, s := range r.TransactionStates {
					ids = append(ids, s.TransactionalID)
				}
				return codes(r.ErrorCode) + " " + listed(x, kmsg.ACLResourceTypeTransactionalId, x.c.X(), ids), nil
			},
			needs: []azNeed{{res: X, op: opDescribe, denied: "0 hidden"}},
			ok:    "0 listed",
		},
		{
			// Joining (epoch 0) subscribed to the cell's topic.
			api: "68 ConsumerGroupHeartbeat", topics: 1,
			probe: func(x *azCtx) (string, error) {
				code, err := consumerHeartbeat(x)
				return codes(code), err
			},
			needs: []azNeed{{res: G, op: opRead, denied: "30"}, {res: T, op: opDescribe, denied: "29"}},
			ok:    "0",
		},
		{
			// The admin is a member, assigned the cell's topic: Kafka
			// (handleConsumerGroupDescribe, 4.0) answers a group whose
			// members' assignments name a topic the caller may not
			// describe with TOPIC_AUTHORIZATION_FAILED and nothing
			// else; the table does not say so (see the report).
			api: "69 ConsumerGroupDescribe", topics: 1,
			setup: func(x *azCtx) error {
				code, err := consumerHeartbeat(x)
				if err == nil && code != 0 {
					err = fmt.Errorf("ConsumerGroupHeartbeat: %s", codeName(code))
				}
				return err
			},
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrConsumerGroupDescribeRequest()
				req.Groups, req.IncludeAuthorizedOperations = []string{x.c.G()}, true
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				g := resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
				return codes(g.ErrorCode) + " " + ops(g.AuthorizedOperations), nil
			},
			needs: []azNeed{{res: G, op: opDescribe, denied: "30 " + ops(opsOmitted)}, {res: T, op: opDescribe, denied: "29 " + ops(opsOmitted)}},
			ok:    "0 " + ops(opBits(opDescribe)),
			extra: []azVariant{{"Read and Delete", []azACL{allow(G, opRead, azLit), allow(G, opDelete, azPre), allow(T, opDescribe, azLit)},
				"0 " + ops(opBits(opRead, opDescribe, opDelete))}},
		},
		{
			api: "76 ShareGroupHeartbeat", topics: 1,
			probe: func(x *azCtx) (string, error) {
				code, err := shareHeartbeat(x)
				return codes(code), err
			},
			needs: []azNeed{{res: G, op: opRead, denied: "30"}, {res: T, op: opDescribe, denied: "29"}},
			ok:    "0",
		},
		{
			// As ConsumerGroupDescribe: the assigned topic needs
			// Describe too (Kafka's handleShareGroupDescribe).
			api: "77 ShareGroupDescribe", topics: 1, setup: shareMember,
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrShareGroupDescribeRequest()
				req.GroupIDs, req.IncludeAuthorizedOperations = []string{x.c.G()}, true
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				g := resp.(*kmsg.ShareGroupDescribeResponse).Groups[0]
				return codes(g.ErrorCode) + " " + ops(g.AuthorizedOperations), nil
			},
			needs: []azNeed{{res: G, op: opDescribe, denied: "30 " + ops(opsOmitted)}, {res: T, op: opDescribe, denied: "29 " + ops(opsOmitted)}},
			ok:    "0 " + ops(opBits(opDescribe)),
			extra: []azVariant{{"All less DENY AlterConfigs", []azACL{allow(G, opAll, azPre), deny(G, opAltCfg, azAny), allow(T, opRead, azAny)},
				"0 " + ops(opBits(opsMinus(groupOps, opAltCfg)...))}},
		},
		{
			// Opening a share session (membership is not checked):
			// top-level/partition; an unauthorized group: the whole
			// response 30, no partitions.
			api: "78 ShareFetch", topics: 1,
			probe: func(x *azCtx) (string, error) {
				resp, err := x.do(shareFetchReq(x.c.G(), "m-"+x.c.user(), x.a.id(x.c.T()), 0, 10, 0))
				if err != nil {
					return "", err
				}
				return shareFetchCodes(resp.(*kmsg.ShareFetchResponse)), nil
			},
			needs: []azNeed{{res: G, op: opRead, denied: "30/-"}, {res: T, op: opRead, denied: "0/29"}},
			ok:    "0/0",
		},
		{
			// The cell's principal opens a session (acquiring the one
			// record), then acknowledges it at epoch 1.
			api: "79 ShareAcknowledge", topics: 1, setup: produceOne,
			probe: func(x *azCtx) (string, error) {
				member, id := "m-"+x.c.user(), x.a.id(x.c.T())
				fr, err := x.do(shareFetchReq(x.c.G(), member, id, 0, 10, 2*time.Second))
				if err != nil {
					return "", err
				}
				f := fr.(*kmsg.ShareFetchResponse)
				if want, got := x.c.want, shareFetchCodes(f); want == "0/0" && got != want {
					return "session open " + got, nil
				}
				resp, err := x.do(shareAckReq(x.c.G(), member, id, 1, 0, acks(0, 0, 1)))
				if err != nil {
					return "", err
				}
				r := resp.(*kmsg.ShareAcknowledgeResponse)
				top, part, ok := lsAckCodes(r)
				if !ok {
					return codes(top) + "/-", nil
				}
				return codes(top) + "/" + codes(part), nil
			},
			needs: []azNeed{{res: G, op: opRead, denied: "30/-"}, {res: T, op: opRead, denied: "0/29"}},
			ok:    "0/0",
		},
		{
			api: "90 DescribeShareGroupOffsets named", topics: 1, setup: shareSession(T),
			probe: describeShareOffsetsProbe(true),
			needs: []azNeed{{res: G, op: opDescribe, denied: "30 -"}, {res: T, op: opDescribe, denied: "0 a:29"}},
			ok:    "0 a:0",
		},
		{
			// All topics: those the cell may not describe are left
			// out (b is in the group too).
			api: "90 DescribeShareGroupOffsets all", topics: 1, topic2: true, setup: shareSession(T, T2),
			probe: describeShareOffsetsProbe(false),
			needs: []azNeed{{res: G, op: opDescribe, denied: "30 -"}, {res: T, op: opDescribe, pats: litPre, denied: "0 -"}},
			ok:    "0 a:0",
		},
		{
			api: "91 AlterShareGroupOffsets", topics: 1, setup: shareSession(T),
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
				req.GroupID = x.c.G()
				rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
				rt.Topic = x.c.T()
				rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
				rp.Partition, rp.StartOffset = 0, 0
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				r := resp.(*kmsg.AlterShareGroupOffsetsResponse)
				if len(r.Topics) == 0 || len(r.Topics[0].Partitions) == 0 {
					return codes(r.ErrorCode) + "/-", nil
				}
				return codes(r.ErrorCode) + "/" + codes(r.Topics[0].Partitions[0].ErrorCode), nil
			},
			needs: []azNeed{{res: G, op: opRead, denied: "30/-"}, {res: T, op: opRead, denied: "0/29"}},
			ok:    "0/0",
		},
		{
			api: "92 DeleteShareGroupOffsets", topics: 1, setup: shareSession(T),
			probe: func(x *azCtx) (string, error) {
				req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
				req.GroupID = x.c.G()
				rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
				rt.Topic = x.c.T()
				req.Topics = append(req.Topics, rt)
				resp, err := x.do(req)
				if err != nil {
					return "", err
				}
				r := resp.(*kmsg.DeleteShareGroupOffsetsResponse)
				if len(r.Topics) == 0 {
					return codes(r.ErrorCode) + "/-", nil
				}
				return codes(r.ErrorCode) + "/" + codes(r.Topics[0].ErrorCode), nil
			},
			needs: []azNeed{{res: G, op: opDelete, denied: "30/-"}, {res: T, op: opRead, denied: "0/29"}},
			ok:    "0/0",
		},
		{
			// Authentication APIs need no ACL: a principal without any
			// is answered (it authenticated with SaslHandshake and
			// SaslAuthenticate to get here).
			api: "18 ApiVersions",
			probe: func(x *azCtx) (string, error) {
				resp, err := x.do(kmsg.NewPtrApiVersionsRequest())
				if err != nil {
					return "", err
				}
				return codes(resp.(*kmsg.ApiVersionsResponse).ErrorCode), nil
			},
			extra: []azVariant{{"no ACL", nil, "0"}},
		},
	}
}

func fetchProbe(replica int32) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		req := fetchRequest(x.c.T(), x.a.id(x.c.T()), 0, 0, 0)
		req.ReplicaID = replica
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		r := resp.(*kmsg.FetchResponse)
		if r.ErrorCode != 0 {
			return "top " + codes(r.ErrorCode), nil
		}
		return codes(r.Topics[0].Partitions[0].ErrorCode), nil
	}
}

// addPartitionsV5Probe adds partition 0 of the cell's topic to its
// transaction in a v5 batch and reports the top-level code.
func addPartitionsV5Probe(verifyOnly bool) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		c := x.c
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = c.X(), c.pid, c.epoch, verifyOnly
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = c.T(), []int32{0}
		tx.Topics = append(tx.Topics, tt)
		req.Transactions = append(req.Transactions, tx)
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		return codes(resp.(*kmsg.AddPartitionsToTxnResponse).ErrorCode), nil
	}
}

func offsetForLeaderEpochProbe(replica int32) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = replica
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = x.c.T()
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, -1, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		return codes(resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode), nil
	}
}

// offsetFetchProbe asks for the cell's group's offsets (of partition 0
// of the cell's topic if named, else all) and reports "group-error
// topic:partition-error..." ("-": no partitions).
func offsetFetchProbe(named bool) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = x.c.G()
		req.Group = x.c.G()
		if named {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.TopicID, gt.Partitions = x.c.T(), x.a.id(x.c.T()), []int32{0}
			g.Topics = append(g.Topics, gt)
			ot := kmsg.NewOffsetFetchRequestTopic()
			ot.Topic, ot.Partitions = x.c.T(), []int32{0}
			req.Topics = append(req.Topics, ot)
		}
		req.Groups = append(req.Groups, g)
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		r := resp.(*kmsg.OffsetFetchResponse)
		var parts []string
		code := r.ErrorCode
		if r.Version >= 8 {
			rg := r.Groups[0]
			code = rg.ErrorCode
			for _, rt := range rg.Topics {
				name := rt.Topic
				if rt.TopicID != [16]byte{} {
					for _, tp := range []string{x.c.T(), x.c.T2()} {
						if x.a.id(tp) == rt.TopicID {
							name = tp
						}
					}
				}
				for _, p := range rt.Partitions {
					parts = append(parts, fmt.Sprintf("%s:%d", label(x, name), p.ErrorCode))
				}
			}
		} else {
			for _, rt := range r.Topics {
				for _, p := range rt.Partitions {
					parts = append(parts, fmt.Sprintf("%s:%d", label(x, rt.Topic), p.ErrorCode))
				}
			}
		}
		if len(parts) == 0 {
			parts = []string{"-"}
		}
		slices.Sort(parts)
		return codes(code) + " " + strings.Join(parts, " "), nil
	}
}

func describeGroupsProbe(withOps bool) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups, req.IncludeAuthorizedOperations = []string{x.c.G()}, withOps
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		g := resp.(*kmsg.DescribeGroupsResponse).Groups[0]
		if !withOps {
			return codes(g.ErrorCode), nil
		}
		return codes(g.ErrorCode) + " " + ops(g.AuthorizedOperations), nil
	}
}

func listGroupsProbe(x *azCtx) (string, error) {
	resp, err := x.do(kmsg.NewPtrListGroupsRequest())
	if err != nil {
		return "", err
	}
	r := resp.(*kmsg.ListGroupsResponse)
	if r.ErrorCode != 0 {
		return "top " + codes(r.ErrorCode), nil
	}
	var names []string
	for _, g := range r.Groups {
		names = append(names, g.Group)
	}
	if x.c.allowed(kmsg.ACLResourceTypeCluster, "kafka-cluster", opDescribe) {
		// Describe on the cluster: every group, no leak to check.
		if slices.Contains(names, x.c.G()) {
			return "listed", nil
		}
		return "hidden", nil
	}
	return listed(x, kmsg.ACLResourceTypeGroup, x.c.G(), names), nil
}

func createTopicsProbe(x *azCtx) (string, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = x.c.T(), 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := x.do(req)
	if err != nil {
		return "", err
	}
	r := resp.(*kmsg.CreateTopicsResponse).Topics[0]
	return fmt.Sprintf("%d/%d", r.ErrorCode, r.ConfigErrorCode), nil
}

func initPIDProbe(transactional bool) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		var txn *string
		if transactional {
			txn = kmsg.StringPtr(x.c.X())
		}
		resp, err := x.do(ltInitReq(txn, -1, -1))
		if err != nil {
			return "", err
		}
		return codes(resp.(*kmsg.InitProducerIDResponse).ErrorCode), nil
	}
}

func describeClusterProbe(asking bool) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = asking
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		r := resp.(*kmsg.DescribeClusterResponse)
		return codes(r.ErrorCode) + " " + ops(r.ClusterAuthorizedOperations), nil
	}
}

func shareFetchCodes(r *kmsg.ShareFetchResponse) string {
	if len(r.Topics) == 0 || len(r.Topics[0].Partitions) == 0 {
		return codes(r.ErrorCode) + "/-"
	}
	return codes(r.ErrorCode) + "/" + codes(r.Topics[0].Partitions[0].ErrorCode)
}

// describeShareOffsetsProbe asks for the cell's share group's offsets
// (partition 0 of the cell's topic if named, else all) and reports
// "group-error topic:partition-error..." ("-": none).
func describeShareOffsetsProbe(named bool) func(x *azCtx) (string, error) {
	return func(x *azCtx) (string, error) {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = x.c.G()
		if named {
			gt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
			gt.Topic, gt.Partitions = x.c.T(), []int32{0}
			g.Topics = append(g.Topics, gt)
		}
		req.Groups = append(req.Groups, g)
		resp, err := x.do(req)
		if err != nil {
			return "", err
		}
		rg := resp.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0]
		var parts []string
		for _, rt := range rg.Topics {
			for _, p := range rt.Partitions {
				parts = append(parts, fmt.Sprintf("%s:%d", label(x, rt.Topic), p.ErrorCode))
			}
		}
		if len(parts) == 0 {
			parts = []string{"-"}
		}
		slices.Sort(parts)
		return codes(rg.ErrorCode) + " " + strings.Join(parts, " "), nil
	}
}

// kmsgUUID formats a topic id as Kafka does (base64 URL, no padding).
func kmsgUUID(id [16]byte) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}
