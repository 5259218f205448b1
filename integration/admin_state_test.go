package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker"
	"github.com/shoal-mq/shoal/integration/workload"
)

// TestAdminState builds known state on one broker — three topics with
// known record counts, a classic consumer group and a KIP-848 consumer
// group that committed known offsets, a share group whose member
// accepted a known set of records — and checks that what kcat -L, kadm
// and sarama's ClusterAdmin report about the cluster, topics, groups,
// lag and log directories equals it, while the members are active and
// after they leave.
func TestAdminState(t *testing.T) {
	t.Parallel()
	kcat := requireTool(t, "kcat")
	b := startBroker(t)
	ctx := testContext(t)
	adm := b.admin(t)
	if !b.External {
		noRebalanceDelay(ctx, t, adm)
	}

	// The broker: from the configuration when it is ours.
	md, err := adm.BrokerMetadata(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, md.Brokers)
	require.NotEmpty(t, md.Cluster, "cluster id")
	node := md.Controller
	if !b.External {
		host, port, err := net.SplitHostPort(b.Addr)
		require.NoError(t, err)
		require.Len(t, md.Brokers, 1)
		assert.Equal(t, broker.DefaultConfig().NodeID, md.Brokers[0].NodeID, "node id")
		assert.Equal(t, host, md.Brokers[0].Host, "advertised host")
		assert.Equal(t, port, strconv.Itoa(int(md.Brokers[0].Port)), "advertised port")
		assert.Equal(t, md.Brokers[0].NodeID, node, "the one broker is the controller")
	}

	// Topics and what is in them.
	const valueSize = 100
	prod := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produce := func(tt *adminTopic, p int32, n int) {
		t.Helper()
		var rs []*kgo.Record
		for range n {
			rs = append(rs, &kgo.Record{Topic: tt.name, Partition: p, Value: make([]byte, valueSize)})
		}
		require.NoError(t, prod.ProduceSync(ctx, rs...).FirstErr())
		tt.ends[p] += int64(n)
	}
	newTopic := func(counts ...int) *adminTopic {
		t.Helper()
		name := topicName(t)
		cr, err := adm.CreateTopic(ctx, int32(len(counts)), 1, nil, name)
		require.NoError(t, err)
		require.NoError(t, cr.Err, cr.ErrMessage)
		tt := &adminTopic{name: name, id: cr.ID, ends: make([]int64, len(counts))}
		for p, n := range counts {
			produce(tt, int32(p), n)
		}
		return tt
	}
	tA := newTopic(10, 20, 30) // the classic group's
	tB := newTopic(8, 12)      // the KIP-848 group's
	tS := newTopic(10)         // the share group's
	topics := []*adminTopic{tA, tB, tS}

	// Members: one per group, all joining at once.
	gC, gK, gS := "admin-classic-"+tA.name, "admin-848-"+tB.name, "admin-share-"+tS.name
	require.NoError(t, workload.SetGroupConfigs(ctx, b.client(t), gS, "share.auto.offset.reset", "earliest"))
	member := func(assigned chan<- struct{}, want int, opts ...kgo.Opt) (*kgo.Client, func()) {
		t.Helper()
		if assigned != nil {
			var mu sync.Mutex
			n := 0
			opts = append(opts, kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, ps := range m {
					n += len(ps)
				}
				if n == want {
					close(assigned)
				}
			}))
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{
			kgo.SeedBrokers(b.Seeds...),
			kgo.RetryTimeout(20 * time.Second),
			kgo.FetchMaxWait(500 * time.Millisecond),
		}, opts...)...)
		require.NoError(t, err)
		var closeOnce sync.Once
		leave := func() { closeOnce.Do(cl.Close) }
		t.Cleanup(leave)
		return cl, leave
	}
	assignedC, assignedK := make(chan struct{}), make(chan struct{})
	cC, leaveC := member(assignedC, 3, kgo.ClientID("admin-state-classic"), kgo.ConsumerGroup(gC),
		kgo.ConsumeTopics(tA.name), kgo.DisableAutoCommit())
	cK, leaveK := member(assignedK, 2, kgo.ClientID("admin-state-848"), kgo.ConsumerGroup(gK),
		kgo.ConsumeTopics(tB.name), kgo.DisableAutoCommit(), kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer())
	var shareAcks shareAckLog
	cS, leaveS := member(nil, 0, kgo.ClientID("admin-state-share"), kgo.ShareGroup(gS), kgo.ConsumeTopics(tS.name), shareAcks.opt())
	for _, c := range []struct {
		what string
		ch   chan struct{}
	}{{"classic", assignedC}, {"KIP-848", assignedK}} {
		select {
		case <-c.ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("the %s member was not assigned every partition", c.what)
		}
	}

	// Known commits: lag is the end offset minus these.
	commit := func(cl *kgo.Client, topic string, offsets map[int32]int64) {
		t.Helper()
		eo := map[int32]kgo.EpochOffset{}
		for p, o := range offsets {
			eo[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
		var cerr error
		cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: eo},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				if cerr = err; err != nil {
					return
				}
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						if e := kerr.ErrorForCode(rp.ErrorCode); e != nil && cerr == nil {
							cerr = fmt.Errorf("commit %s/%d: %w", rt.Topic, rp.Partition, e)
						}
					}
				}
			})
		require.NoError(t, cerr)
	}
	committedC := map[int32]int64{0: 4, 1: 20} // partition 2: no commit
	committedK := map[int32]int64{0: 3, 1: 12}
	commit(cC, tA.name, committedC)
	commit(cK, tB.name, committedK)

	// The share member takes all ten records, accepts 0-3 and 6-7 and
	// releases 4-5 and 8-9: the SPSO is 4 and the lag 10-4-2 = 4.
	// The ten were produced as one batch, which one ShareFetch returns
	// whole; the member must not poll again before acknowledging (the
	// next poll would accept what it holds).
	held := pollUntilHeld(t, ctx, cS, "the share member")
	require.Len(t, held, int(tS.ends[0]), "one poll returns the whole batch")
	for _, r := range held {
		if r.Offset < 4 || r.Offset == 6 || r.Offset == 7 {
			r.Ack(kgo.AckAccept)
		} else {
			r.Ack(kgo.AckRelease)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	require.NoError(t, cS.FlushAcks(fctx))
	cancel()
	for _, o := range shareAcks.take() {
		require.NoError(t, o.err, "share ack on partition %d", o.partition)
	}
	spso, shareAccepted := int64(4), int64(2) // accepted above the SPSO

	waitUntil(t, "every group is Stable", func() bool {
		listed, err := adm.ListGroups(ctx)
		require.NoError(t, err)
		return listed[gC].State == "Stable" && listed[gK].State == "Stable" && listed[gS].State == "Stable"
	})

	t.Run("kcat", func(t *testing.T) {
		brokers := strings.Join(b.Seeds, ",")
		out := run(t, ctx, "", kcat, "-b", brokers, "-L")
		if !b.External {
			assert.Contains(t, out, " 1 brokers:\n", "kcat -L:\n%s", out)
			assert.Contains(t, out, fmt.Sprintf(" %d topics:\n", len(topics)), "kcat -L:\n%s", out)
			assert.Contains(t, out, fmt.Sprintf("  broker %d at %s (controller)\n", node, b.Addr), "kcat -L:\n%s", out)
		}
		for _, tt := range topics {
			header := fmt.Sprintf("  topic \"%s\" with %d partitions:\n", tt.name, len(tt.ends))
			i := strings.Index(out, header)
			require.GreaterOrEqual(t, i, 0, "kcat -L does not show %q:\n%s", header, out)
			rest := out[i+len(header):]
			for p := range tt.ends {
				line := fmt.Sprintf("    partition %d, leader %d, replicas: %d, isrs: %d\n", p, node, node, node)
				assert.True(t, strings.HasPrefix(rest, line), "kcat -L, %s partition %d: want %q, have:\n%s", tt.name, p, line, rest)
				rest = strings.TrimPrefix(rest, line)
			}
		}

		var js kcatMetadata
		jout := run(t, ctx, "", kcat, "-b", brokers, "-L", "-J")
		require.NoError(t, json.Unmarshal([]byte(jout), &js), "kcat -L -J:\n%s", jout)
		assert.Equal(t, node, js.ControllerID, "controllerid")
		if !b.External {
			assert.Len(t, js.Topics, len(topics))
			require.Len(t, js.Brokers, 1)
			assert.Equal(t, node, js.Brokers[0].ID)
			assert.Equal(t, b.Addr, js.Brokers[0].Name)
		}
		for _, tt := range topics {
			i := slices.IndexFunc(js.Topics, func(jt kcatTopic) bool { return jt.Topic == tt.name })
			require.GreaterOrEqual(t, i, 0, "kcat -L -J does not list %s", tt.name)
			jt := js.Topics[i]
			assert.Empty(t, jt.Error)
			require.Len(t, jt.Partitions, len(tt.ends), "%s partitions", tt.name)
			for p, jp := range jt.Partitions {
				assert.Equal(t, int32(p), jp.Partition)
				assert.Empty(t, jp.Error)
				assert.Equal(t, node, jp.Leader, "%s/%d leader", tt.name, p)
				if assert.Len(t, jp.Replicas, 1) && assert.Len(t, jp.ISRs, 1) {
					assert.Equal(t, node, jp.Replicas[0].ID)
					assert.Equal(t, node, jp.ISRs[0].ID)
				}
			}
		}
	})

	t.Run("kadm", func(t *testing.T) {
		// DescribeCluster agrees with Metadata.
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, b.client(t))
		require.NoError(t, err)
		require.NoError(t, kerr.ErrorForCode(dc.ErrorCode))
		assert.Equal(t, md.Cluster, dc.ClusterID)
		assert.Equal(t, node, dc.ControllerID)
		require.Len(t, dc.Brokers, len(md.Brokers))
		if !b.External {
			assert.Equal(t, md.Brokers[0].NodeID, dc.Brokers[0].NodeID)
			assert.Equal(t, md.Brokers[0].Host, dc.Brokers[0].Host)
			assert.Equal(t, md.Brokers[0].Port, dc.Brokers[0].Port)
		}

		// Topics, partitions, ids, leaders, end offsets.
		listed, err := adm.ListTopics(ctx)
		require.NoError(t, err)
		ends, err := adm.ListEndOffsets(ctx, tA.name, tB.name, tS.name)
		require.NoError(t, err)
		require.NoError(t, ends.Error())
		for _, tt := range topics {
			td, ok := listed[tt.name]
			require.True(t, ok, "ListTopics does not list %s", tt.name)
			require.NoError(t, td.Err)
			assert.Equal(t, tt.id, td.ID, "%s topic id", tt.name)
			assert.False(t, td.IsInternal)
			require.Len(t, td.Partitions, len(tt.ends), "%s partitions", tt.name)
			for p, end := range tt.ends {
				pd := td.Partitions[int32(p)]
				assert.NoError(t, pd.Err)
				assert.Equal(t, node, pd.Leader, "%s/%d leader", tt.name, p)
				assert.Equal(t, []int32{node}, pd.Replicas, "%s/%d replicas", tt.name, p)
				assert.Equal(t, []int32{node}, pd.ISR, "%s/%d isr", tt.name, p)
				o, ok := ends.Lookup(tt.name, int32(p))
				require.True(t, ok)
				assert.Equal(t, end, o.Offset, "%s/%d end offset", tt.name, p)
			}
		}

		// Groups by type and state.
		groups, err := adm.ListGroups(ctx)
		require.NoError(t, err)
		for _, g := range []struct{ name, typ, protocolType string }{
			{gC, "classic", "consumer"}, {gK, "consumer", "consumer"}, {gS, "share", "share"},
		} {
			lg, ok := groups[g.name]
			if assert.True(t, ok, "ListGroups does not list %s", g.name) {
				assert.Equal(t, g.typ, lg.GroupType, "%s type", g.name)
				assert.Equal(t, g.protocolType, lg.ProtocolType, "%s protocol type", g.name)
				assert.Equal(t, "Stable", lg.State, "%s state", g.name)
				assert.Equal(t, node, lg.Coordinator)
			}
		}

		// State and type filters, and describing every group of a type.
		stable, err := adm.ListGroups(ctx, "Stable")
		require.NoError(t, err)
		empty, err := adm.ListGroups(ctx, "Empty")
		require.NoError(t, err)
		shares, err := adm.ListGroupsByType(ctx, []string{"share"})
		require.NoError(t, err)
		allClassic, err := adm.DescribeGroups(ctx)
		require.NoError(t, err)
		allConsumer, err := adm.DescribeConsumerGroups(ctx)
		require.NoError(t, err)
		allShare, err := adm.DescribeShareGroups(ctx)
		require.NoError(t, err)
		allShareOffsets, err := adm.DescribeShareGroupOffsets(ctx)
		require.NoError(t, err)
		for _, c := range []struct {
			what string
			has  func(string) bool
			want []string
		}{
			{"ListGroups Stable", func(g string) bool { _, ok := stable[g]; return ok }, []string{gC, gK, gS}},
			{"ListGroups Empty", func(g string) bool { _, ok := empty[g]; return ok }, nil},
			{"ListGroups share", func(g string) bool { _, ok := shares[g]; return ok }, []string{gS}},
			{"DescribeGroups", func(g string) bool { _, ok := allClassic[g]; return ok }, []string{gC}},
			{"DescribeConsumerGroups", func(g string) bool { _, ok := allConsumer[g]; return ok }, []string{gK}},
			{"DescribeShareGroups", func(g string) bool { _, ok := allShare[g]; return ok }, []string{gS}},
			{"DescribeShareGroupOffsets", func(g string) bool { _, ok := allShareOffsets[g]; return ok }, []string{gS}},
		} {
			for _, g := range []string{gC, gK, gS} {
				assert.Equal(t, slices.Contains(c.want, g), c.has(g), "%s lists %s", c.what, g)
			}
		}

		// The classic group: DescribeGroups and Lag.
		dg, err := adm.DescribeGroups(ctx, gC)
		require.NoError(t, err)
		g := dg[gC]
		require.NoError(t, g.Err, g.ErrMessage)
		assert.Equal(t, "Stable", g.State)
		assert.Equal(t, "consumer", g.ProtocolType)
		assert.Equal(t, "cooperative-sticky", g.Protocol, "kgo's default balancer")
		require.Len(t, g.Members, 1)
		assert.Equal(t, "admin-state-classic", g.Members[0].ClientID)
		assert.NotEmpty(t, g.Members[0].ClientHost)
		if a, ok := g.Members[0].Assigned.AsConsumer(); assert.True(t, ok, "assignment") && assert.Len(t, a.Topics, 1) {
			assert.Equal(t, tA.name, a.Topics[0].Topic)
			assert.ElementsMatch(t, []int32{0, 1, 2}, a.Topics[0].Partitions)
		}
		if j, ok := g.Members[0].Join.AsConsumer(); assert.True(t, ok, "subscription") {
			assert.Equal(t, []string{tA.name}, j.Topics)
		}
		requireClassicLag(t, ctx, adm, gC, tA, committedC, false)

		// The KIP-848 group: DescribeGroups is for classic groups only
		// (Kafka answers GROUP_ID_NOT_FOUND, so kadm's Lag cannot
		// describe it); ConsumerGroupDescribe, OffsetFetch and
		// ListOffsets give its state and lag.
		lags, err := adm.Lag(ctx, gK)
		require.NoError(t, err)
		assert.ErrorIs(t, lags[gK].DescribeErr, kerr.GroupIDNotFound, "DescribeGroups of a KIP-848 group")
		dcg, err := adm.DescribeConsumerGroups(ctx, gK)
		require.NoError(t, err)
		cg := dcg[gK]
		require.NoError(t, cg.Err)
		assert.Equal(t, "Stable", cg.State)
		assert.Equal(t, "range", cg.AssignorName)
		assert.Positive(t, cg.Epoch)
		assert.Equal(t, cg.Epoch, cg.AssignmentEpoch)
		require.Len(t, cg.Members, 1)
		m := cg.Members[0]
		assert.Equal(t, "admin-state-848", m.ClientID)
		assert.Equal(t, int8(1), m.MemberType, "a consumer-protocol member")
		assert.NotEmpty(t, m.ClientHost)
		assert.Equal(t, cg.Epoch, m.MemberEpoch)
		assert.Equal(t, []string{tB.name}, m.SubscribedTopics)
		assert.Equal(t, kadm.TopicsSet{tB.name: {0: {}, 1: {}}}, m.Assignment)
		assert.Equal(t, kadm.TopicsSet{tB.name: {0: {}, 1: {}}}, m.TargetAssignment)
		require848Lag(t, ctx, adm, gK, tB, committedK)

		// The share group: DescribeShareGroups and DescribeShareGroupOffsets.
		dsg, err := adm.DescribeShareGroups(ctx, gS)
		require.NoError(t, err)
		sg := dsg[gS]
		require.NoError(t, sg.Err)
		assert.Equal(t, "Stable", sg.GroupState)
		assert.Equal(t, "simple", sg.Assignor)
		assert.Positive(t, sg.GroupEpoch)
		assert.Equal(t, sg.GroupEpoch, sg.AssignmentEpoch)
		require.Len(t, sg.Members, 1)
		sm := sg.Members[0]
		assert.Equal(t, "admin-state-share", sm.ClientID)
		assert.NotEmpty(t, sm.ClientHost)
		if !b.External {
			// Kafka's form (InetAddress.toString()), as kafka-consumer-groups shows it.
			for _, h := range []string{g.Members[0].ClientHost, m.ClientHost, sm.ClientHost} {
				assert.Equal(t, "/127.0.0.1", h, "client host")
			}
		}
		assert.Equal(t, sg.GroupEpoch, sm.MemberEpoch)
		assert.Equal(t, []string{tS.name}, sm.SubscribedTopicNames)
		assert.Equal(t, kadm.TopicsSet{tS.name: {0: {}}}, sm.Assignment)
		requireShareOffsets(t, ctx, adm, gS, tS, spso, tS.ends[0]-spso-shareAccepted)
		// More records: the lag grows by as many, the SPSO stays.
		produce(tS, 0, 5)
		requireShareOffsets(t, ctx, adm, gS, tS, spso, tS.ends[0]-spso-shareAccepted)

		// Log dirs: real sizes that grow with the log.
		sizes := logDirSizes(t, ctx, adm, topics)
		for _, tt := range topics {
			for p, end := range tt.ends {
				assert.GreaterOrEqual(t, sizes[tt.name][int32(p)], end*valueSize, "%s/%d size for %d records", tt.name, p, end)
				assert.Less(t, sizes[tt.name][int32(p)], end*valueSize*2+4096, "%s/%d size for %d records", tt.name, p, end)
			}
		}
		assert.Less(t, sizes[tA.name][0], sizes[tA.name][1])
		assert.Less(t, sizes[tA.name][1], sizes[tA.name][2])
		// A log is its record batches: the size is what a fetch from
		// the start returns.
		fcl := b.client(t)
		for _, tt := range topics {
			assert.Equal(t, sizes[tt.name], fetchedBytes(t, ctx, fcl.Broker(int(node)), tt), "%s: log dir sizes and fetched bytes", tt.name)
		}
		produce(tA, 0, 40)
		grown := logDirSizes(t, ctx, adm, topics)
		assert.GreaterOrEqual(t, grown[tA.name][0]-sizes[tA.name][0], int64(40*valueSize), "%s/0 after 40 more records", tA.name)
		assert.Equal(t, sizes[tA.name][1], grown[tA.name][1], "%s/1 unchanged", tA.name)
		assert.Equal(t, grown[tA.name], fetchedBytes(t, ctx, fcl.Broker(int(node)), tA), "%s: log dir sizes and fetched bytes", tA.name)
	})

	// sarama at an old protocol generation (Metadata v7, DescribeGroups
	// and ListGroups v2, OffsetFetch v5, DescribeLogDirs v1, no
	// DescribeCluster) and a current one.
	for _, version := range []sarama.KafkaVersion{sarama.V2_1_0_0, sarama.V4_0_0_0} {
		t.Run("sarama-"+version.String(), func(t *testing.T) {
			cfg := saramaConfig(version)
			ca, err := sarama.NewClusterAdmin(b.Seeds, cfg)
			require.NoError(t, err)
			defer func() { assert.NoError(t, ca.Close()) }()

			brokers, controller, err := ca.DescribeCluster()
			require.NoError(t, err)
			assert.Equal(t, node, controller)
			require.Len(t, brokers, len(md.Brokers))
			if !b.External {
				assert.Equal(t, node, brokers[0].ID())
				assert.Equal(t, b.Addr, brokers[0].Addr())
			}

			details, err := ca.ListTopics()
			require.NoError(t, err)
			for _, tt := range topics {
				d, ok := details[tt.name]
				if !assert.True(t, ok, "ListTopics does not list %s", tt.name) {
					continue
				}
				assert.Equal(t, int32(len(tt.ends)), d.NumPartitions, "%s partitions", tt.name)
				assert.Equal(t, int16(1), d.ReplicationFactor, "%s replication factor", tt.name)
				want := map[int32][]int32{}
				for p := range tt.ends {
					want[int32(p)] = []int32{node}
				}
				assert.Equal(t, want, d.ReplicaAssignment, "%s replica assignment", tt.name)
			}
			tms, err := ca.DescribeTopics([]string{tA.name, tB.name, tS.name})
			require.NoError(t, err)
			require.Len(t, tms, len(topics))
			for i, tm := range tms {
				tt := topics[i]
				assert.Equal(t, tt.name, tm.Name)
				assert.Equal(t, sarama.ErrNoError, tm.Err)
				if version.IsAtLeast(sarama.V2_8_0_0) {
					assert.Equal(t, [16]byte(tt.id), [16]byte(tm.Uuid), "%s topic id", tt.name)
				}
				assert.False(t, tm.IsInternal)
				require.Len(t, tm.Partitions, len(tt.ends))
				for p, pm := range tm.Partitions {
					assert.Equal(t, int32(p), pm.ID)
					assert.Equal(t, sarama.ErrNoError, pm.Err)
					assert.Equal(t, node, pm.Leader)
					assert.Equal(t, []int32{node}, pm.Replicas)
					assert.Equal(t, []int32{node}, pm.Isr)
				}
			}

			groups, err := ca.ListConsumerGroups()
			require.NoError(t, err)
			assert.Equal(t, "consumer", groups[gC])
			assert.Equal(t, "consumer", groups[gK])
			assert.Equal(t, "share", groups[gS])

			gds, err := ca.DescribeConsumerGroups([]string{gC, gK})
			require.NoError(t, err)
			require.Len(t, gds, 2)
			byName := map[string]*sarama.GroupDescription{}
			for _, gd := range gds {
				byName[gd.GroupId] = gd
			}
			gd := byName[gC]
			require.NotNil(t, gd)
			assert.Equal(t, sarama.ErrNoError, gd.Err)
			assert.Equal(t, "Stable", gd.State)
			assert.Equal(t, "consumer", gd.ProtocolType)
			assert.Equal(t, "cooperative-sticky", gd.Protocol)
			require.Len(t, gd.Members, 1)
			for _, m := range gd.Members {
				assert.Equal(t, "admin-state-classic", m.ClientId)
				a, err := m.GetMemberAssignment()
				require.NoError(t, err)
				assert.Equal(t, map[string][]int32{tA.name: {0, 1, 2}}, sortedTopics(a.Topics))
				meta, err := m.GetMemberMetadata()
				require.NoError(t, err)
				assert.Equal(t, []string{tA.name}, meta.Topics)
			}
			// A KIP-848 group is not a classic group: DescribeGroups below v6
			// (sarama's) answers Dead without an error, as Kafka does.
			if gd := byName[gK]; assert.NotNil(t, gd) {
				assert.Equal(t, sarama.ErrNoError, gd.Err)
				assert.Equal(t, "Dead", gd.State)
				assert.Empty(t, gd.Members)
			}

			for _, c := range []struct {
				group     string
				tt        *adminTopic
				committed map[int32]int64
			}{{gC, tA, committedC}, {gK, tB, committedK}} {
				resp, err := ca.ListConsumerGroupOffsets(c.group, nil)
				require.NoError(t, err)
				assert.Equal(t, sarama.ErrNoError, resp.Err)
				require.Len(t, resp.Blocks, 1, "%s commits one topic", c.group)
				got := map[int32]int64{}
				for p, blk := range resp.Blocks[c.tt.name] {
					assert.Equal(t, sarama.ErrNoError, blk.Err)
					got[p] = blk.Offset
				}
				assert.Equal(t, c.committed, got, "%s committed offsets", c.group)
			}
			// Asked for by name, a partition without a commit is at -1.
			resp, err := ca.ListConsumerGroupOffsets(gC, map[string][]int32{tA.name: {0, 1, 2}})
			require.NoError(t, err)
			named := map[int32]int64{}
			for p, blk := range resp.Blocks[tA.name] {
				assert.Equal(t, sarama.ErrNoError, blk.Err)
				named[p] = blk.Offset
			}
			assert.Equal(t, map[int32]int64{0: committedC[0], 1: committedC[1], 2: -1}, named)

			dirs, err := ca.DescribeLogDirs([]int32{node})
			require.NoError(t, err)
			want := logDirSizes(t, ctx, adm, topics)
			got := map[string]map[int32]int64{}
			for _, d := range dirs[node] {
				require.Equal(t, sarama.ErrNoError, d.ErrorCode)
				for _, dt := range d.Topics {
					for _, dp := range dt.Partitions {
						if got[dt.Topic] == nil {
							got[dt.Topic] = map[int32]int64{}
						}
						got[dt.Topic][dp.PartitionID] = dp.Size
					}
				}
			}
			for _, tt := range topics {
				assert.Equal(t, want[tt.name], got[tt.name], "%s log dir sizes", tt.name)
			}
		})
	}

	// Members leave: the groups are Empty and keep their offsets.
	leaveC()
	leaveK()
	leaveS()
	t.Run("after leaving", func(t *testing.T) {
		dg, err := adm.DescribeGroups(ctx, gC)
		require.NoError(t, err)
		assert.Equal(t, "Empty", dg[gC].State)
		assert.Empty(t, dg[gC].Members)
		requireClassicLag(t, ctx, adm, gC, tA, committedC, true)

		dcg, err := adm.DescribeConsumerGroups(ctx, gK)
		require.NoError(t, err)
		require.NoError(t, dcg[gK].Err)
		assert.Equal(t, "Empty", dcg[gK].State)
		assert.Empty(t, dcg[gK].Members)
		require848Lag(t, ctx, adm, gK, tB, committedK)

		dsg, err := adm.DescribeShareGroups(ctx, gS)
		require.NoError(t, err)
		require.NoError(t, dsg[gS].Err)
		assert.Equal(t, "Empty", dsg[gS].GroupState)
		assert.Empty(t, dsg[gS].Members)
		// What the member still held went back: nothing more was accepted.
		requireShareOffsets(t, ctx, adm, gS, tS, spso, tS.ends[0]-spso-shareAccepted)

		groups, err := adm.ListGroups(ctx)
		require.NoError(t, err)
		stable, err := adm.ListGroups(ctx, "stable") // filters ignore case
		require.NoError(t, err)
		for _, g := range []string{gC, gK, gS} {
			assert.Equal(t, "Empty", groups[g].State, "%s state", g)
			assert.NotContains(t, stable, g)
		}

		ca, err := sarama.NewClusterAdmin(b.Seeds, saramaConfig(sarama.V4_0_0_0))
		require.NoError(t, err)
		defer func() { assert.NoError(t, ca.Close()) }()
		gds, err := ca.DescribeConsumerGroups([]string{gC})
		require.NoError(t, err)
		require.Len(t, gds, 1)
		assert.Equal(t, "Empty", gds[0].State)
		assert.Equal(t, "consumer", gds[0].ProtocolType)
		assert.Empty(t, gds[0].Members)
	})
}

// adminTopic is a topic TestAdminState created and what it holds.
type adminTopic struct {
	name string
	id   kadm.TopicID
	ends []int64 // end offset per partition
}

// kcatMetadata is what kcat -L -J prints.
type kcatMetadata struct {
	ControllerID int32 `json:"controllerid"`
	Brokers      []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []kcatTopic `json:"topics"`
}

type kcatTopic struct {
	Topic      string `json:"topic"`
	Error      string `json:"error"`
	Partitions []struct {
		Partition int32  `json:"partition"`
		Leader    int32  `json:"leader"`
		Error     string `json:"error"`
		Replicas  []struct {
			ID int32 `json:"id"`
		} `json:"replicas"`
		ISRs []struct {
			ID int32 `json:"id"`
		} `json:"isrs"`
	} `json:"partitions"`
}

// requireClassicLag checks kadm's Lag of a classic group against the
// truth: per committed partition the end offset minus the committed
// offset; a partition without a commit lags by everything in it (its log
// starts at 0).
func requireClassicLag(t *testing.T, ctx context.Context, adm *kadm.Client, group string, tt *adminTopic, committed map[int32]int64, empty bool) {
	t.Helper()
	lags, err := adm.Lag(ctx, group)
	require.NoError(t, err)
	l := lags[group]
	require.NoError(t, l.Error())
	want := map[int32]int64{} // partition -> lag
	for p, end := range tt.ends {
		if c, ok := committed[int32(p)]; ok {
			want[int32(p)] = end - c
		} else {
			want[int32(p)] = end
		}
	}
	require.Len(t, l.Lag[tt.name], len(want), "lag of %s on %s: %+v", group, tt.name, l.Lag[tt.name])
	var total int64
	for p, lag := range want {
		ml, ok := l.Lag.Lookup(tt.name, p)
		require.True(t, ok, "no lag for %s/%d", tt.name, p)
		require.NoError(t, ml.Err)
		c, ok := committed[p]
		if !ok {
			c = -1
		}
		assert.Equal(t, c, ml.Commit.At, "%s/%d committed", tt.name, p)
		assert.Equal(t, tt.ends[p], ml.End.Offset, "%s/%d end", tt.name, p)
		assert.Equal(t, lag, ml.Lag, "%s/%d lag", tt.name, p)
		assert.Equal(t, empty, ml.IsEmpty(), "%s/%d has no member", tt.name, p)
		total += lag
	}
	assert.Equal(t, total, l.Lag.Total(), "total lag of %s", group)
}

// require848Lag checks a KIP-848 group's lag as kafka-consumer-groups
// computes it (committed offsets from OffsetFetch, end offsets from
// ListOffsets) against the truth.
func require848Lag(t *testing.T, ctx context.Context, adm *kadm.Client, group string, tt *adminTopic, committed map[int32]int64) {
	t.Helper()
	fetched, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	require.NoError(t, fetched.Error())
	ends, err := adm.ListEndOffsets(ctx, tt.name)
	require.NoError(t, err)
	require.NoError(t, ends.Error())
	got := map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		require.Equal(t, tt.name, o.Topic, "%s committed to another topic", group)
		got[o.Partition] = o.At
	})
	require.Equal(t, committed, got, "committed offsets of %s", group)
	lag := kadm.CalculateGroupLag(kadm.DescribedGroup{Group: group}, fetched, ends)
	for p, end := range tt.ends {
		ml, ok := lag.Lookup(tt.name, int32(p))
		require.True(t, ok, "no lag for %s/%d", tt.name, p)
		require.NoError(t, ml.Err)
		assert.Equal(t, end-committed[int32(p)], ml.Lag, "%s/%d lag", tt.name, p)
	}
}

// requireShareOffsets checks DescribeShareGroupOffsets of the one
// partition of tt.
func requireShareOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, group string, tt *adminTopic, start, lag int64) {
	t.Helper()
	got, err := adm.DescribeShareGroupOffsets(ctx, group)
	require.NoError(t, err)
	require.NoError(t, got.Error())
	o, ok := got[group].Offsets.Lookup(tt.name, 0)
	require.True(t, ok, "no share offsets for %s/0: %+v", tt.name, got[group].Offsets)
	require.NoError(t, o.Err)
	assert.Equal(t, tt.id, o.TopicID, "topic id")
	assert.Equal(t, [2]int64{start, lag}, [2]int64{o.StartOffset, o.Lag}, "SPSO and lag of %s on %s (end %d)", group, tt.name, tt.ends[0])
}

// logDirSizes returns the size of every partition of topics, as
// DescribeLogDirs reports them.
func logDirSizes(t *testing.T, ctx context.Context, adm *kadm.Client, topics []*adminTopic) map[string]map[int32]int64 {
	t.Helper()
	s := kadm.TopicsSet{}
	for _, tt := range topics {
		for p := range tt.ends {
			s.Add(tt.name, int32(p))
		}
	}
	all, err := adm.DescribeAllLogDirs(ctx, s)
	require.NoError(t, err)
	out := map[string]map[int32]int64{}
	for _, dirs := range all {
		for _, d := range dirs {
			require.NoError(t, d.Err, "log dir %s", d.Dir)
			assert.NotEmpty(t, d.Dir)
			assert.Positive(t, d.TotalBytes, "volume size of %s", d.Dir)
			assert.Positive(t, d.UsableBytes, "usable bytes of %s", d.Dir)
			assert.LessOrEqual(t, d.UsableBytes, d.TotalBytes)
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
				if out[p.Topic] == nil {
					out[p.Topic] = map[int32]int64{}
				}
				out[p.Topic][p.Partition] = p.Size
			})
		}
	}
	for _, tt := range topics {
		require.Len(t, out[tt.name], len(tt.ends), "log dir partitions of %s", tt.name)
	}
	return out
}

// sortedTopics sorts each topic's partitions.
func sortedTopics(m map[string][]int32) map[string][]int32 {
	for _, ps := range m {
		slices.Sort(ps)
	}
	return m
}

// fetchedBytes fetches every partition of tt from offset 0 to its end in
// one request and returns the bytes of record batches each returned.
func fetchedBytes(t *testing.T, ctx context.Context, br *kgo.Broker, tt *adminTopic) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, 64<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = tt.name, tt.id
	for p := range tt.ends {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), 0, 64<<20
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	kr, err := br.Request(ctx, req)
	require.NoError(t, err)
	resp := kr.(*kmsg.FetchResponse)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
	out := map[int32]int64{}
	for _, ft := range resp.Topics {
		for _, fp := range ft.Partitions {
			require.NoError(t, kerr.ErrorForCode(fp.ErrorCode), "fetch %s/%d", tt.name, fp.Partition)
			require.Equal(t, tt.ends[fp.Partition], fp.HighWatermark, "%s/%d high watermark", tt.name, fp.Partition)
			out[fp.Partition] = int64(len(fp.RecordBatches))
		}
	}
	require.Len(t, out, len(tt.ends), "fetched partitions of %s", tt.name)
	return out
}
