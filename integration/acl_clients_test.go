package integration

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker"
	"github.com/shoal-mq/shoal/integration/workload"
)

// aclcAuthorizer turns the authorizer on with admin as the one super
// user (startSASLBroker's first administrator).
func aclcAuthorizer(c *broker.Config) {
	c.Security["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	c.Security["super.users"] = "User:admin"
}

// aclcUser adds a SCRAM-SHA-512 user as admin.
func aclcUser(t *testing.T, ctx context.Context, adm *kadm.Client, user, pass string) {
	t.Helper()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pass}})
	require.NoError(t, err)
	require.NoError(t, res.Error())
}

// aclcCreate creates ACLs as admin and fails the test on any error.
func aclcCreate(t *testing.T, ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(ctx, b)
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err, "creating %+v", r)
	}
}

// TestACLClients: with the authorizer on, real clients work with
// exactly the ACLs Kafka's documentation gives a producer, a consumer
// in a group, a transactional producer and a share consumer (here on
// PREFIXED topic patterns), over SASL_SSL with SCRAM; a user without
// ACLs sees no topic and is refused everything; the ACLs are durable
// across a restart, listed by DescribeAcls and gone after DeleteAcls.
func TestACLClients(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t, aclcAuthorizer)
	ctx := testContext(t)
	tc := clientTLS(e.ca)
	admCl := e.client(t, e.saslS, tc, scram512("admin", adminPassword))
	adm := kadm.NewClient(admCl)
	aclcUser(t, ctx, adm, "app", "app-secret")
	aclcUser(t, ctx, adm, "eve", "eve-secret")
	_, err := adm.CreateTopic(ctx, 2, 1, nil, "orders-eu")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{}, "secret")
	require.NoError(t, err)

	// Producer, transactional producer, consumer group and share group:
	// the documented sets, nothing more.
	aclcCreate(t, ctx, adm, kadm.NewACLs().Allow("User:app").
		Topics("orders").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe))
	aclcCreate(t, ctx, adm, kadm.NewACLs().Allow("User:app").Groups("app-group", "app-share").Operations(kadm.OpRead))
	aclcCreate(t, ctx, adm, kadm.NewACLs().Allow("User:app").TransactionalIDs("app-tx").Operations(kadm.OpWrite))
	e.restart(t) // the ACLs are durable (and the listeners' ports new)
	admCl = e.client(t, e.saslS, tc, scram512("admin", adminPassword))
	adm = kadm.NewClient(admCl)

	app := func(opts ...kgo.Opt) *kgo.Client {
		return e.client(t, e.saslS, tc, scram512("app", "app-secret"), opts...)
	}
	// Idempotent produce (kgo's default): InitProducerId is allowed by
	// Write on a topic (KIP-679), no IdempotentWrite needed.
	p := app(kgo.DefaultProduceTopic("orders-eu"))
	for i := range 50 {
		require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}).FirstErr())
	}
	// A transaction, committed.
	tx := app(kgo.DefaultProduceTopic("orders-eu"), kgo.TransactionalID("app-tx"))
	require.NoError(t, tx.BeginTransaction())
	for i := range 10 {
		tx.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "tx%d", i)}, nil)
	}
	require.NoError(t, tx.Flush(ctx))
	require.NoError(t, tx.EndTransaction(ctx, kgo.TryCommit))

	// A consumer group, read_committed, with committed offsets.
	cons := app(kgo.ConsumeTopics("orders-eu"), kgo.ConsumerGroup("app-group"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < 60 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		got += fs.NumRecords()
	}
	require.Equal(t, 60, got)
	require.NoError(t, cons.CommitUncommittedOffsets(ctx))

	// A share group (its auto.offset.reset set by admin: AlterConfigs
	// on a group is not in app's set).
	require.NoError(t, workload.SetGroupConfigs(ctx, admCl, "app-share", "share.auto.offset.reset", "earliest"))
	sc := app(kgo.ShareGroup("app-share"), kgo.ConsumeTopics("orders-eu"))
	seen := 0
	for seen < 60 {
		fs := sc.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		seen += fs.NumRecords()
	}

	// app sees only its topics.
	appAdm := kadm.NewClient(app())
	tds, err := appAdm.ListTopics(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"orders-eu"}, tds.Names())
	_, err = appAdm.CreateTopic(ctx, 1, 1, nil, "orders-new")
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed, "Create is not in app's set")

	// eve has no ACLs: no topics, and every write and read is refused.
	eve := func(opts ...kgo.Opt) *kgo.Client {
		return e.client(t, e.saslS, tc, scram512("eve", "eve-secret"), opts...)
	}
	eveAdm := kadm.NewClient(eve())
	tds, err = eveAdm.ListTopics(ctx)
	require.NoError(t, err)
	require.Empty(t, tds.Names(), "topics eve cannot Describe are left out of Metadata")
	ep := eve(kgo.DefaultProduceTopic("orders-eu"), kgo.DisableIdempotentWrite())
	err = ep.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
	// DescribeAcls of app's ACLs (raw, to see the broker's answer).
	appACLs := kmsg.NewPtrDescribeACLsRequest()
	appACLs.ResourceType, appACLs.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	appACLs.Operation, appACLs.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	appACLs.Principal = kmsg.StringPtr("User:app")
	evd, err := appACLs.RequestWith(ctx, eve())
	require.NoError(t, err)
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, evd.ErrorCode)
	dg, err := eveAdm.DescribeGroups(ctx, "app-group")
	if err == nil {
		err = dg["app-group"].Err
	}
	require.ErrorIs(t, err, kerr.GroupAuthorizationFailed)
	lag, err := eveAdm.FetchOffsets(ctx, "app-group")
	if err == nil {
		err = lag.Error()
	}
	require.True(t, errors.Is(err, kerr.GroupAuthorizationFailed), "got %v", err)

	// DescribeAcls lists app's five ACLs; DeleteAcls removes its topic
	// ones, durably, and app is refused from then on.
	described, err := appACLs.RequestWith(ctx, admCl)
	require.NoError(t, err)
	require.Zero(t, described.ErrorCode)
	n := 0
	for _, r := range described.Resources {
		n += len(r.ACLs)
	}
	require.Len(t, described.Resources, 4, "orders* (prefixed), app-group, app-share, app-tx")
	require.Equal(t, 6, n, "Write, Read, Describe on orders*, Read on two groups, Write on app-tx")
	del, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:app").AllowHosts().Topics("orders").
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAny))
	require.NoError(t, err)
	require.Len(t, del, 1)
	require.NoError(t, del[0].Err)
	require.Len(t, del[0].Deleted, 3)
	e.restart(t) // the deletion is durable
	p2 := app(kgo.DefaultProduceTopic("orders-eu"), kgo.DisableIdempotentWrite())
	err = p2.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr()
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
}

// TestACLKcat: librdkafka (kcat) produces and consumes in a group with
// the documented ACLs only, over SASL_SSL, and a user without them gets
// librdkafka's authorization error.
func TestACLKcat(t *testing.T) {
	t.Parallel()
	kcat := requireTool(t, "kcat")
	e := startSASLBroker(t, aclcAuthorizer)
	ctx := testContext(t)
	adm := kadm.NewClient(e.client(t, e.saslS, clientTLS(e.ca), scram512("admin", adminPassword)))
	aclcUser(t, ctx, adm, "kcatuser", "kc-secret")
	_, err := adm.CreateTopic(ctx, 1, 1, nil, "kcat-acl")
	require.NoError(t, err)
	aclcCreate(t, ctx, adm, kadm.NewACLs().Allow("User:kcatuser").Topics("kcat-acl").Operations(kadm.OpWrite, kadm.OpRead))
	aclcCreate(t, ctx, adm, kadm.NewACLs().Allow("User:kcatuser").Groups("kc-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpRead))
	args := func(user, pass string) []string {
		return []string{"-b", e.saslS, "-X", "security.protocol=sasl_ssl", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass, "-X", "ssl.ca.location=" + filepath.Join(e.dir, "ca.pem")}
	}
	kc := args("kcatuser", "kc-secret")
	run(t, ctx, "a\nb\nc\n", kcat, append(kc, "-t", "kcat-acl", "-P", "-X", "acks=all")...)
	out := run(t, ctx, "", kcat, append(kc, "-G", "kc-group", "-X", "auto.offset.reset=earliest", "-e", "-q", "kcat-acl")...)
	require.Equal(t, "a\nb\nc\n", out)

	aclcUser(t, ctx, adm, "nobody", "nobody-secret")
	cmdCtx, cancel := contextWithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err = runErr(cmdCtx, kcat, append(args("nobody", "nobody-secret"), "-t", "kcat-acl", "-C", "-o", "beginning", "-e")...)
	require.Error(t, err, "kcat without ACLs:\n%s", out)
	require.Contains(t, out, "authoriz", "kcat reports the authorization failure:\n%s", out)
}

// TestACLRegexSubscription: a KIP-848 regex subscription reaches only
// the topics the member may Describe, as Kafka 4 resolves it; an ACL
// granted later widens it at the next metadata check.
func TestACLRegexSubscription(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t, aclcAuthorizer)
	ctx := testContext(t)
	adm := kadm.NewClient(e.client(t, e.sasl, nil, scram512("admin", adminPassword)))
	aclcUser(t, ctx, adm, "rx", "rx-secret")
	for _, tp := range []string{"rx-seen", "rx-hidden"} {
		_, err := adm.CreateTopic(ctx, 2, 1, nil, tp)
		require.NoError(t, err)
	}
	aclcCreate(t, ctx, adm, kadm.NewACLs().Allow("User:rx").Topics("rx-seen").Groups("rx-group").Operations(kadm.OpRead))
	tds, err := adm.ListTopics(ctx, "rx-seen", "rx-hidden")
	require.NoError(t, err)
	seen, hidden := tds["rx-seen"].ID, tds["rx-hidden"].ID

	cl := e.client(t, e.sasl, nil, scram512("rx", "rx-secret"))
	regex := "rx-.*"
	hb := func(epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = "rx-group", "rx-member", epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 5000
			req.SubscribedTopicRegex = &regex
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Zero(t, resp.ErrorCode, "%v", resp.ErrorMessage)
		return resp
	}
	topicsOf := func(r *kmsg.ConsumerGroupHeartbeatResponse) map[[16]byte]int {
		out := map[[16]byte]int{}
		if r.Assignment != nil {
			for _, tp := range r.Assignment.Topics {
				out[tp.TopicID] += len(tp.Partitions)
			}
		}
		return out
	}
	r := hb(0)
	require.Equal(t, map[[16]byte]int{seen: 2}, topicsOf(r), "the regex reaches only rx-seen")

	aclcCreate(t, ctx, adm, kadm.NewACLs().Allow("User:rx").Topics("rx-hidden").Operations(kadm.OpDescribe))
	epoch := r.MemberEpoch
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(200 * time.Millisecond)
		r = hb(epoch)
		epoch = r.MemberEpoch
		if r.Assignment != nil && topicsOf(r)[hidden] == 2 {
			break
		}
		require.True(t, time.Now().Before(deadline), "rx-hidden never joined the assignment once describable")
	}
}

// TestACLRegexReachPerMember: two members of one group subscribe with
// the same regex; when one loses Describe on a topic the other keeps,
// the group's resolved topics do not change, yet that member's share of
// the topic moves to the other at the next metadata check.
func TestACLRegexReachPerMember(t *testing.T) {
	t.Parallel()
	e := startSASLBroker(t, aclcAuthorizer)
	ctx := testContext(t)
	adm := kadm.NewClient(e.client(t, e.sasl, nil, scram512("admin", adminPassword)))
	_, err := adm.CreateTopic(ctx, 4, 1, nil, "rx2-t")
	require.NoError(t, err)
	tds, err := adm.ListTopics(ctx, "rx2-t")
	require.NoError(t, err)
	tid := tds["rx2-t"].ID
	regex := "rx2-.*"
	type member struct {
		cl    *kgo.Client
		id    string
		epoch int32
		parts int
	}
	var ms []*member
	for _, u := range []string{"rxa", "rxb"} {
		aclcUser(t, ctx, adm, u, u+"-secret")
		aclcCreate(t, ctx, adm, kadm.NewACLs().Allow("User:"+u).Topics("rx2-t").Groups("rx2-group").Operations(kadm.OpRead))
		ms = append(ms, &member{cl: e.client(t, e.sasl, nil, scram512(u, u+"-secret")), id: u + "-member"})
	}
	hb := func(m *member) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = "rx2-group", m.id, m.epoch
		if m.epoch == 0 {
			req.RebalanceTimeoutMillis = 5000
			req.SubscribedTopicRegex = &regex
		}
		// Owned partitions: what the last assignment gave (the member
		// gives up what it is no longer assigned at once).
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(ctx, m.cl)
		require.NoError(t, err)
		require.Zero(t, resp.ErrorCode, "%v", resp.ErrorMessage)
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			m.parts = 0
			for _, tp := range resp.Assignment.Topics {
				if tp.TopicID == tid {
					m.parts += len(tp.Partitions)
				}
			}
		}
	}
	settle := func(what string, want func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !want() {
			require.True(t, time.Now().Before(deadline), "%s: rxa has %d partitions, rxb %d", what, ms[0].parts, ms[1].parts)
			for _, m := range ms {
				hb(m)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	settle("both share the topic", func() bool { return ms[0].parts == 2 && ms[1].parts == 2 })
	del, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:rxb").AllowHosts().Topics("rx2-t").Operations(kadm.OpRead))
	require.NoError(t, err)
	require.NoError(t, del[0].Err)
	require.Len(t, del[0].Deleted, 1)
	settle("rxb lost Describe on rx2-t", func() bool { return ms[0].parts == 4 && ms[1].parts == 0 })
}
