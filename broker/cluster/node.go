package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/raftnet"
	"github.com/shoal-mq/shoal/broker/replica"
	"github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/log/raftlog"
)

// MetadataTopic is the name of Kafka's metadata topic, which no topic
// may take: its partition 0 would be MetadataGroup (Kafka refuses it
// too: "Creation of internal topic __cluster_metadata is prohibited.").
const MetadataTopic = "__cluster_metadata"

// MetadataGroup is the metadata group's name, and its log's directory.
const MetadataGroup = MetadataTopic + "-0"

// ErrReservedTopic is a creation of MetadataTopic.
var ErrReservedTopic = errors.New("cluster: creation of internal topic " + MetadataTopic + " is prohibited")

// Config configures a Node.
type Config struct {
	NodeID    uint64
	ClusterID string
	// DataDir holds the metadata log and the partitions' logs.
	DataDir string
	FS      log.FS
	// PeerListen is the raft listener (shoal.peer.listen); Listener,
	// when set, is used instead.
	PeerListen string
	Listener   net.Listener
	// PeerTLS, when set, secures the peer network (mutual TLS).
	PeerTLS *raftnet.TLSConfig
	// Voters maps the metadata group's voters to their peer addresses
	// (controller.quorum.voters). Every broker of the cluster is one.
	Voters map[uint64]string
	// Host and Port are this broker's advertised Kafka endpoint,
	// registered in the metadata log.
	Host string
	Port int32
	Rack string
	// Tick is the raft tick (100 ms if zero); an election takes 10 to
	// 20 ticks without a leader, a heartbeat one.
	Tick time.Duration
	// SessionTimeout is broker.session.timeout.ms (9 s if zero, Kafka's
	// default): a registered broker the metadata group's leader has not
	// heard from for that long is fenced (Image.Fenced): reported
	// offline in its partitions' replicas, until it registers again.
	SessionTimeout time.Duration
	// Log configures the metadata log, and every partition log when
	// LogConfig is unset (Replica is set for it).
	Log log.Config
	// LogConfig, when set, gives a partition's log config from its
	// topic's config overrides (Topic.Configs): the broker's topic
	// config defaults under them.
	LogConfig func(topicConfigs map[string]string) log.Config
	Logger    *zap.Logger
	// OnTopic is called for each topic when its creation is applied, and
	// again each time partitions are added to it (from the metadata
	// group's goroutine), with the logs of the partitions placed here, by
	// index, their groups started: the
	// broker serves those logs from then on; the groups write and close
	// them. The topic's other partitions live on other brokers.
	OnTopic func(t *Topic, hosted map[int32]*log.Partition)
	// OnTopicDeleted is called (from the metadata group's goroutine)
	// when a topic's deletion is applied, before the groups of its
	// partitions here stop and their logs are deleted, and again each
	// time a restarted broker applies the metadata log: the broker stops
	// serving the topic and drops what it keeps of it, once.
	OnTopicDeleted func(t *Topic)
	// OnTopicConfigs is called (from the metadata group's goroutine)
	// when a change of a topic's configs is applied, with the topic as
	// changed. The partitions' logs here already have their new config
	// (LogConfig).
	OnTopicConfigs func(t *Topic)
	// AutoLeaderRebalance (auto.leader.rebalance.enable): a partition's
	// leader that is not its preferred replica (the first) hands
	// leadership to it (raft's leadership transfer) once it is in sync,
	// when more than LeaderImbalancePercentage percent of the
	// partitions preferring that broker are led elsewhere (from the
	// image's partition states), checked every
	// LeaderImbalanceCheckInterval (300 s if zero): leaders go back to
	// where placement spread them, after a broker's restart say.
	AutoLeaderRebalance          bool
	LeaderImbalancePercentage    int
	LeaderImbalanceCheckInterval time.Duration
	// ReplicaLagMax is replica.lag.time.max.ms (30 s if zero): a
	// follower not caught up with its leader within it is out of the
	// partition's ISR (replica.Config.LagMax).
	ReplicaLagMax time.Duration
	// OnHighWatermark is called (from the group's goroutine) when a
	// partition's high watermark moved: long polls wake.
	OnHighWatermark func(name string)
}

// ErrNotLeader is a produce on a broker that does not lead the
// partition; Leader is the leader this broker knows (0: none).
type ErrNotLeader struct{ Leader uint64 }

func (e *ErrNotLeader) Error() string {
	return fmt.Sprintf("cluster: not the leader (leader %d)", e.Leader)
}

// ErrUnknownPartition is a produce or read of a partition this broker
// does not host.
var ErrUnknownPartition = errors.New("cluster: partition not hosted here")

// Node is one broker of the cluster.
type Node struct {
	cfg    Config
	logger *zap.Logger
	tr     *raftnet.Transport
	meta   *group
	stop   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	image   *Image
	groups  map[string]*group
	waiting map[string]chan string // request id -> outcome, for proposers
	closed  bool
	// deleted are the ids of the topics whose deletion this broker has
	// applied, kept in DataDir/deletedTopicsFile: a restarted broker
	// applying the metadata log again starts no group of theirs.
	deleted map[[16]byte]bool
	// caughtUp: the metadata group applied every entry its leader had
	// committed when this process first asked (replica ReadIndex), as a
	// Kafka broker catches up with the metadata log before it is
	// unfenced. Until then this broker's image may still hold a topic
	// deleted while it was down, replayed from its own log, and it
	// acknowledges no produce (caughtUp false: ErrNotLeader).
	caughtUp atomic.Bool
	// balanceCounts are preferredCounts' counts, of the image at
	// applied (guarded by mu).
	balanceCounts struct {
		applied          uint64
		total, elsewhere map[uint64]int
	}
}

// Start opens the metadata group and the partitions the metadata log
// places here, joins the peer network and registers the broker.
func Start(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Tick == 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 9 * time.Second
	}
	if cfg.LeaderImbalanceCheckInterval == 0 {
		cfg.LeaderImbalanceCheckInterval = 300 * time.Second
	}
	if _, ok := cfg.Voters[cfg.NodeID]; !ok {
		return nil, fmt.Errorf("cluster: node %d is not among the voters", cfg.NodeID)
	}
	cfg.Log.Replica = true
	n := &Node{cfg: cfg, logger: cfg.Logger.With(zap.Uint64("node", cfg.NodeID)), stop: make(chan struct{}),
		image: newImage(), groups: map[string]*group{}, waiting: map[string]chan string{}}
	if err := n.loadDeleted(); err != nil {
		return nil, err
	}
	tr, err := raftnet.Start(raftnet.Config{NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, Listen: cfg.PeerListen,
		Listener: cfg.Listener, Peers: cfg.Voters, Handler: n.deliver, Logger: cfg.Logger, TLS: cfg.PeerTLS})
	if err != nil {
		return nil, err
	}
	n.tr = tr
	voters := make([]uint64, 0, len(cfg.Voters))
	for id := range cfg.Voters {
		voters = append(voters, id)
	}
	if _, err := n.openGroup(MetadataGroup, nil, voters, false, cfg.Log); err != nil { // sets n.meta
		_ = tr.Close()
		return nil, err
	}
	if err := n.removeLeftMoved(); err != nil {
		n.logger.Warn("cannot list the data directory for deleted partitions", zap.Error(err))
	}
	n.wg.Add(1)
	go n.register()
	return n, nil
}

// openGroup opens a group's log and replica and starts its goroutine.
// A preferred replica (the first of a partition's, as Kafka's preferred
// leader) of a group that has never had a term campaigns at once, and
// again each tick while no leader is known, for eagerTicks: a new
// topic gets its leaders in milliseconds instead of after an election
// timeout (1 to 2 s). Again each tick because the other replicas may
// not run the group yet when the first campaign reaches them (they
// apply the topic's record a moment later), and drop its messages.
//
// topic is the partition's topic (nil: the metadata group). Its id
// makes the group's name on the wire (wireName), and its log's
// directory holds it (claimDir).
func (n *Node) openGroup(name string, topic *Topic, voters []uint64, preferred bool, lc log.Config) (*group, error) {
	dir := filepath.Join(n.cfg.DataDir, name)
	wire, metadata := name, topic == nil
	if !metadata {
		wire = wireName(name, topic.ID)
		if have, ok, err := dirTopic(n.cfg.FS, dir); err == nil && ok && have != topic.ID && n.isDeleted(have) {
			// A deleted incarnation's, which its deletion failed to
			// move aside (logged then): moved now, as deleteTopic does.
			to, err := moveAside(n.cfg.FS, dir, have)
			if err == nil && to != "" {
				err = n.cfg.FS.SyncDir(n.cfg.DataDir)
				n.removeMoved([]string{to})
			}
			if err != nil {
				return nil, fmt.Errorf("cluster: open %s: move a deleted topic's partition aside: %w", name, err)
			}
		}
		if err := claimDir(n.cfg.FS, dir, topic.ID); err != nil {
			return nil, fmt.Errorf("cluster: open %s: %w", name, err)
		}
	}
	p, err := log.Open(n.cfg.FS, dir, lc, n.logger)
	if err != nil {
		return nil, fmt.Errorf("cluster: open %s: %w", name, err)
	}
	st, err := raftlog.Open(n.cfg.FS, dir, p)
	if err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("cluster: open %s: %w", name, err)
	}
	var g *group
	rc := replica.Config{ID: n.cfg.NodeID, Voters: voters, Logger: n.logger.With(zap.String("group", name)), LagMax: n.cfg.ReplicaLagMax,
		Send: func(m replica.Message) { n.tr.Send(wire, m.To, m.Parts...) },
		Sync: func(j *replica.SyncJob) { g.sync(j) }}
	if metadata {
		rc.Apply, rc.ForwardProposals = n.applyMetadata, true
	} else {
		rc.Apply = func(index uint64, body []byte) { g.applyPartition(index, body) }
		id := topic.ID
		rc.PreviousISR = func() []uint64 {
			n.mu.Lock()
			defer n.mu.Unlock()
			if ps, ok := n.image.Partitions[name]; ok && (ps.TopicID == id || ps.TopicID == [16]byte{}) {
				return ps.ISR
			}
			return nil
		}
	}
	r, err := replica.New(p, st, rc)
	if err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("cluster: start %s: %w", name, err)
	}
	g = &group{name: name, wire: wire, n: n, r: r, p: p, work: make(chan func(), 1024), synced: make(chan *replica.SyncJob, 1),
		quit: make(chan struct{}), halt: make(chan struct{}), exited: make(chan struct{})}
	if topic != nil {
		g.topicID = topic.ID
		g.preferred = voters[0]
	}
	if preferred && r.Term() == 0 {
		g.eager = eagerTicks
	}
	n.mu.Lock()
	n.groups[name] = g
	n.mu.Unlock()
	if metadata {
		n.meta = g // before its goroutine, which reads it (review: set after, a data race)
	}
	n.wg.Add(1)
	go g.run()
	return g, nil
}

// deliver is the transport's handler: a message for one of our groups.
// A message for a group this broker does not run (yet) is dropped;
// raft sends again. So is one for another incarnation of a partition
// (a topic deleted and created again under its name: the sender has
// not applied the deletion yet), which must not reach this one's raft.
func (n *Node) deliver(wire string, from uint64, data []byte) {
	name := wire
	if i := strings.LastIndexByte(wire, '@'); i >= 0 {
		name = wire[:i]
	}
	n.mu.Lock()
	g := n.groups[name]
	n.mu.Unlock()
	if g == nil || g.wire != wire {
		return
	}
	g.queue(func() {
		if err := g.r.Step(data); err != nil && !errors.Is(err, replica.ErrStopped) {
			g.n.logger.Warn("raft message refused", zap.String("group", name), zap.Uint64("from", from), zap.Error(err))
		}
	})
}

// applyMetadata applies a committed metadata record (the metadata
// group's goroutine calls it) and starts the groups of new partitions
// placed here.
func (n *Node) applyMetadata(index uint64, body []byte) {
	n.mu.Lock()
	outcome, created, reconfigured, deleted := n.image.apply(index, body)
	closed := n.closed
	n.mu.Unlock()
	if created != nil && !closed {
		n.startPartitions(created)
	}
	if deleted != nil && !closed {
		n.deleteTopic(deleted)
	}
	if reconfigured != nil && !closed {
		n.reconfigure(reconfigured)
	}
	var r record
	if json.Unmarshal(body, &r) != nil {
		return
	}
	if r.Op == "elect_preferred" && r.Elect != nil && outcome == "" && !closed {
		n.applyElect(r.Elect)
	}
	// The proposer hears of the outcome once the partitions run here.
	if r.Request != "" {
		n.mu.Lock()
		if ch, ok := n.waiting[r.Request]; ok {
			delete(n.waiting, r.Request)
			ch <- outcome
		}
		n.mu.Unlock()
	}
}

// logConfig is the log config of a partition of a topic with
// overrides topicConfigs.
func (n *Node) logConfig(topicConfigs map[string]string) log.Config {
	lc := n.cfg.Log
	if n.cfg.LogConfig != nil {
		lc = n.cfg.LogConfig(topicConfigs)
	}
	lc.Replica = true
	return lc
}

// reconfigure gives the logs of t's partitions here their new config,
// then tells OnTopicConfigs.
func (n *Node) reconfigure(t *Topic) {
	lc := n.logConfig(t.Configs)
	for i := range t.Partitions {
		n.mu.Lock()
		g := n.groups[PartitionName(t.Name, int32(i))]
		n.mu.Unlock()
		if g != nil {
			g.p.SetConfig(lc)
		}
	}
	if n.cfg.OnTopicConfigs != nil {
		n.cfg.OnTopicConfigs(t)
	}
}

// startPartitions starts the groups of a new topic's partitions placed
// on this broker, then hands the topic to OnTopic.
func (n *Node) startPartitions(t *Topic) {
	if n.isDeleted(t.ID) { // applied again after a restart: deleted later in the log
		return
	}
	hosted := map[int32]*log.Partition{}
	defer func() {
		if n.cfg.OnTopic != nil {
			n.cfg.OnTopic(t, hosted)
		}
	}()
	for i, replicas := range t.Partitions {
		if !slices.Contains(replicas, n.cfg.NodeID) {
			continue
		}
		name := PartitionName(t.Name, int32(i))
		n.mu.Lock()
		running := n.groups[name]
		n.mu.Unlock()
		if running != nil {
			if running.topicID != t.ID || running == n.meta {
				// Never another topic's log (nor the metadata log: a
				// record the image refuses now, from an older log).
				n.logger.Error("a partition placed here has the name of another group", zap.String("partition", name))
			} else {
				hosted[int32(i)] = running.p
			}
			continue
		}
		g, err := n.openGroup(name, t, replicas, replicas[0] == n.cfg.NodeID, n.logConfig(t.Configs))
		if err != nil {
			n.logger.Error("cannot start a partition placed here", zap.String("partition", name), zap.Error(err))
			continue
		}
		hosted[int32(i)] = g.p
	}
}

// propose proposes a metadata record until it is applied or ctx ends,
// and returns its outcome.
func (n *Node) propose(ctx context.Context, r record) (string, error) {
	r.Request = newRequestID()
	body, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	ch := make(chan string, 1)
	n.mu.Lock()
	n.waiting[r.Request] = ch
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.waiting, r.Request)
		n.mu.Unlock()
	}()
	retry := time.NewTicker(20 * n.cfg.Tick)
	defer retry.Stop()
	for {
		n.meta.queue(func() { _ = n.meta.r.ProposeInternal(body) }) // dropped: retried below
		select {
		case outcome := <-ch:
			return outcome, nil
		case <-ctx.Done():
			return "", ctx.Err()
		case <-n.stop:
			return "", errors.New("cluster: node closed")
		case <-retry.C:
		}
	}
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// register records this broker's endpoint in the metadata log, retrying
// until it is applied (the metadata group may have no leader yet).
func (n *Node) register() {
	defer n.wg.Done()
	b := Broker{ID: n.cfg.NodeID, Host: n.cfg.Host, Port: n.cfg.Port, Rack: n.cfg.Rack}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-n.stop
		cancel()
	}()
	defer cancel()
	if _, err := n.propose(ctx, record{Op: "register", Broker: &b}); err != nil && ctx.Err() == nil {
		n.logger.Error("broker registration failed", zap.Error(err))
	}
}

// CreateTopic creates a topic of partitions partitions with rf replicas
// each, placed over the registered brokers, and returns once this
// broker applied the creation. An existing topic is an error naming
// TOPIC_ALREADY_EXISTS.
func (n *Node) CreateTopic(ctx context.Context, name string, partitions, rf int, configs map[string]string) error {
	if partitions < 1 {
		return fmt.Errorf("cluster: %d partitions", partitions)
	}
	if name == MetadataTopic {
		return ErrReservedTopic
	}
	n.mu.Lock()
	assign, err := place(n.image.BrokerIDs(), name, partitions, rf)
	n.mu.Unlock()
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	outcome, err := n.propose(ctx, record{Op: "create_topic", Topic: &Topic{Name: name, ID: id, Partitions: assign, Configs: configs}})
	if err != nil {
		return err
	}
	if outcome != "" {
		return fmt.Errorf("cluster: create topic %s: %s", name, outcome)
	}
	return nil
}

// CreatePartitions grows topic to count partitions, the new ones with
// the topic's replication factor, placed as a topic of count partitions
// would be (or as assignment gives, one replica list per new
// partition), and returns once this broker applied the change: every
// broker starts the new partitions placed on it as it applies it. A
// concurrent change of the count is ErrPartitionsConflict.
func (n *Node) CreatePartitions(ctx context.Context, topic string, count int, assignment [][]uint64) error {
	n.mu.Lock()
	cur := n.image.Topics[topic]
	if cur == nil {
		n.mu.Unlock()
		return ErrUnknownTopic
	}
	have, rf := len(cur.Partitions), len(cur.Partitions[0])
	brokers := n.image.BrokerIDs()
	n.mu.Unlock()
	if count <= have {
		return fmt.Errorf("%w: topic %s has %d partitions, not fewer than %d", ErrNotMorePartitions, topic, have, count)
	}
	add := assignment
	if add == nil {
		all, err := place(brokers, topic, count, rf)
		if err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		add = all[have:]
	}
	if len(add) != count-have {
		return fmt.Errorf("cluster: %d replica lists for %d new partitions", len(add), count-have)
	}
	outcome, err := n.propose(ctx, record{Op: "create_partitions", Topic: &Topic{Name: topic, Partitions: add}, Expect: uint64(have)})
	switch {
	case err != nil:
		return err
	case outcome == errPartitionsConflict:
		return ErrPartitionsConflict
	case outcome == errUnknownTopic:
		return ErrUnknownTopic
	case outcome != "":
		return fmt.Errorf("cluster: create partitions of %s: %s", topic, outcome)
	}
	return nil
}

// ErrNotMorePartitions is CreatePartitions asked for no more partitions
// than the topic has.
var ErrNotMorePartitions = errors.New("cluster: not more partitions than the topic has")

// ErrPartitionsConflict is CreatePartitions finding the topic's
// partition count changed meanwhile.
var ErrPartitionsConflict = errors.New("cluster: the topic's partition count changed meanwhile")

// ErrConfigConflict is AlterTopicConfigs finding the topic's configs
// changed since the version the caller read: read them again and retry.
var ErrConfigConflict = errors.New("cluster: the topic's configs changed meanwhile")

// ErrUnknownTopic is AlterTopicConfigs on a topic that does not exist.
var ErrUnknownTopic = errors.New("cluster: unknown topic")

// TopicConfigs returns topic's config overrides as applied here (not to
// be changed) and their version, for AlterTopicConfigs.
func (n *Node) TopicConfigs(topic string) (configs map[string]string, version uint64, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.image.Topics[topic]
	if t == nil {
		return nil, 0, false
	}
	return t.Configs, t.ConfigVersion, true
}

// AlterTopicConfigs replaces topic's config overrides with configs
// through the metadata group, if they are still at version (as
// TopicConfigs returned it; else ErrConfigConflict), and returns once
// this broker applied the change: every broker's partitions of the
// topic take the new config as they apply it.
func (n *Node) AlterTopicConfigs(ctx context.Context, topic string, version uint64, configs map[string]string) error {
	outcome, err := n.propose(ctx, record{Op: "topic_configs", Topic: &Topic{Name: topic, Configs: configs}, Expect: version})
	switch {
	case err != nil:
		return err
	case outcome == errConfigConflict:
		return ErrConfigConflict
	case outcome == errUnknownTopic:
		return ErrUnknownTopic
	case outcome != "":
		return fmt.Errorf("cluster: alter configs of %s: %s", topic, outcome)
	}
	return nil
}

// WaitCaughtUp waits until the metadata group applied every entry its
// leader had committed when this broker asked (Node.caughtUp), as a
// Kafka broker catches up with the metadata log before it serves: until
// then its image may lack topics that exist, or hold one deleted while
// it was down, and it acknowledges no produce. It returns ctx's error
// if that does not happen in time (no quorum: the caller serves
// anyway, reads only).
func (n *Node) WaitCaughtUp(ctx context.Context) error {
	for !n.caughtUp.Load() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// CaughtUp reports whether WaitCaughtUp would return at once.
func (n *Node) CaughtUp() bool { return n.caughtUp.Load() }

// Replicas returns the replicas of partition index of topic (nil when
// unknown), without copying the image.
func (n *Node) Replicas(topic string, index int32) []uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t := n.image.Topics[topic]; t != nil && int(index) < len(t.Partitions) {
		return t.Partitions[index] // never changed in place
	}
	return nil
}

// PartitionState returns the state last published for partition name
// (<topic>-<index>), without copying the image.
func (n *Node) PartitionState(name string) (PartitionState, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ps, ok := n.image.Partitions[name]
	return ps, ok
}

// HasTopic reports whether the applied metadata holds topic name.
func (n *Node) HasTopic(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.image.Topics[name] != nil
}

// VoterCount is the number of brokers in the cluster as configured
// (controller.quorum.voters), registered or not.
func (n *Node) VoterCount() int { return len(n.cfg.Voters) }

// Brokers returns an Image holding only the registered brokers (a
// copy), for callers that need no more than that.
func (n *Node) Brokers() Image {
	n.mu.Lock()
	defer n.mu.Unlock()
	im := Image{Brokers: make(map[uint64]Broker, len(n.image.Brokers)), Fenced: maps.Clone(n.image.Fenced)}
	for id, b := range n.image.Brokers {
		im.Brokers[id] = b
	}
	return im
}

// Fenced reports whether broker id is fenced (Image.Fenced).
func (n *Node) Fenced(id uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.image.Fenced[id]
}

// Image returns a copy of the applied metadata.
func (n *Node) Image() Image {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.image.clone()
}

// PartitionName is the raft group (and directory) of partition index
// of topic: <topic>-<index>.
func PartitionName(topic string, index int32) string { return topic + "-" + strconv.Itoa(int(index)) }

// wireName is a partition group's name on the peer network:
// <topic>-<index>@<topic id in hex>, so that raft messages of a deleted
// topic's group never reach the group of a topic created again under
// its name (topic names have no '@').
func wireName(name string, topicID [16]byte) string {
	return name + "@" + hex.EncodeToString(topicID[:])
}

// Leadership returns what this broker knows of partition name's
// leadership: its group's status when it hosts the partition, else the
// leader and term its leader last published (ok false: neither).
func (n *Node) Leadership(name string) (st Status, ok bool) {
	if st, _, ok = n.Group(name); ok {
		if st.Leader == 0 && st.LastLeader == 0 {
			// Not heard from a leader since this broker started: the
			// last one the metadata log knows, as for a group hosted
			// elsewhere.
			if ps, found := n.PartitionState(name); found {
				st.LastLeader, st.LastTerm = ps.Leader, ps.Term
			}
		}
		return st, true
	}
	if ps, found := n.PartitionState(name); found {
		return Status{Leader: ps.Leader, Term: ps.Term}, true
	}
	return Status{}, false
}

// Status is what a broker knows of one of its groups.
type Status struct {
	Leader   uint64 // 0: none known
	Term     uint64 // the leader epoch
	IsLeader bool
	// LastLeader and LastTerm are the last leader this broker knew and
	// its term, kept through an election (Leader 0), as Kafka's metadata
	// keeps naming a failed leader until a new one is chosen.
	LastLeader, LastTerm uint64
}

// Group returns the status and log of a group this broker runs.
func (n *Node) Group(name string) (Status, *log.Partition, bool) {
	n.mu.Lock()
	g := n.groups[name]
	n.mu.Unlock()
	if g == nil {
		return Status{}, nil, false
	}
	return g.status(), g.p, true
}

// Produce appends a produce's batches to a partition this broker leads
// and returns once they committed (a majority of its replicas has them
// durable).
func (n *Node) Produce(ctx context.Context, partition string, records []byte) (log.AppendResult, error) {
	type result struct {
		res log.AppendResult
		err error
	}
	ch := make(chan result, 1)
	released := n.ProduceAsync(partition, records, 0, func(res log.AppendResult, err error) { ch <- result{res, err} })
	select {
	case r := <-ch:
		return r.res, r.err
	case <-ctx.Done():
		<-released // records are the caller's again
		return log.AppendResult{}, ctx.Err()
	}
}

// ProduceAsync is Produce calling done with the outcome instead: from
// the partition's goroutine (done must not block), or at once. A
// broker that does not lead the partition answers *ErrNotLeader.
//
// records is read, and changed in place (offsets, leader epoch), until
// released is closed: once the partition's goroutine has proposed them
// (raft keeps a copy of each proposed entry, which
// TestProduceKeepsNoRecords checks) or refused them. That comes soon,
// long before done in general, so a caller can reuse the buffer for
// the next request while this one waits for its commit, without
// copying it first.
func (n *Node) ProduceAsync(partition string, records []byte, minInSync int, done func(log.AppendResult, error)) (released <-chan struct{}) {
	rel := make(chan struct{})
	n.mu.Lock()
	g := n.groups[partition]
	n.mu.Unlock()
	if g == nil {
		close(rel)
		done(log.AppendResult{}, ErrUnknownPartition)
		return rel
	}
	if !n.caughtUp.Load() {
		// A leader in a group the metadata log may have deleted while
		// this broker was down: the client retries (a Kafka broker is
		// fenced, leading nothing, until it caught up).
		close(rel)
		done(log.AppendResult{}, &ErrNotLeader{})
		return rel
	}
	answer := func(res log.AppendResult, err error) {
		if errors.Is(err, replica.ErrNotLeader) {
			err = &ErrNotLeader{Leader: g.status().Leader}
		}
		done(res, err)
	}
	if !g.queue(func() {
		g.r.Produce(records, time.Now(), minInSync, answer)
		close(rel)
	}) {
		close(rel)
		// Overloaded or stopped: the client retries, told of the leader
		// this broker knows, unless that is itself.
		leader := g.status().Leader
		if leader == n.cfg.NodeID {
			leader = 0
		}
		done(log.AppendResult{}, &ErrNotLeader{Leader: leader})
	}
	return rel
}

// EndOffsetFor answers OffsetForLeaderEpoch for a partition this broker
// runs, from its term cache (ok false: Kafka's undefined epoch).
func (n *Node) EndOffsetFor(name string, epoch int32) (int32, int64, bool, error) {
	n.mu.Lock()
	g := n.groups[name]
	n.mu.Unlock()
	if g == nil {
		return -1, -1, false, ErrUnknownPartition
	}
	e, off, ok := g.r.EndOffsetFor(uint64(max(epoch, 0)))
	return int32(e), off, ok, nil
}

// MetadataLeader returns the metadata group's leader as this broker
// knows it (0: none), Kafka's controller.
func (n *Node) MetadataLeader() uint64 { return n.meta.status().Leader }

// Close stops every group and the transport and closes the logs.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	close(n.stop)
	n.mu.Unlock()
	n.wg.Wait()
	err := n.tr.Close()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, g := range n.groups {
		if cerr := g.p.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// group is one raft group this broker runs, and its goroutine.
type group struct {
	name    string
	wire    string   // its name on the peer network (wireName)
	topicID [16]byte // zero for the metadata group
	n       *Node
	r       *replica.Replica
	p       *log.Partition
	work    chan func()
	// workMu orders queue against stop: nothing is queued once the
	// goroutine has drained work for the last time.
	workMu  sync.Mutex
	stopped bool
	// synced brings a replica's SyncJob back from its fsync goroutine
	// (sync); syncs counts those goroutines, which stop waits for.
	synced chan *replica.SyncJob
	syncs  sync.WaitGroup
	quit   chan struct{} // closed by stop
	// halt stops this group alone (its topic was deleted); exited is
	// closed once its goroutine has stopped.
	halt, exited chan struct{}

	// The metadata group's leader's view of the brokers (checkBrokers,
	// group goroutine): when each voter was last heard from in the term
	// heardTerm, and the fence record proposed last, and when.
	heardAt   map[uint64]time.Time
	heardTerm uint64
	fencePub  []uint64
	fenceAt   time.Time

	leader, term         atomic.Uint64
	lastLeader, lastTerm atomic.Uint64
	isLeader             atomic.Bool
	hw                   int64 // the high watermark last reported (group goroutine)
	// What publish proposed last, and when (group goroutine).
	pub   PartitionState
	pubAt time.Time
	// preferred is a partition's preferred replica (its first; 0 for
	// the metadata group), and nextBalance when its leader next checks
	// whether to hand leadership to it (balance; group goroutine).
	preferred   uint64
	nextBalance time.Time
	// transferred: balance handed leadership over at its last check;
	// balanceBackoff multiplies the interval after transfers that did
	// not happen.
	transferred    bool
	balanceBackoff int
	// A preferred election asked through the metadata log (elect.go):
	// its deadline, when this leader next tries, and the wait after.
	electUntil, electNext time.Time
	electWait             time.Duration
	// transferUntil: when a leadership transfer started here is
	// cancelled if still pending (checkTransfer; zero: none).
	transferUntil time.Time
	// eager is how many more ticks a new group's preferred replica
	// campaigns while no leader is known (openGroup; group goroutine).
	eager int
	// DeleteRecords (records.go, group goroutine): the proposals waiting
	// for their apply, by request; the log start offset applied entries
	// asked for; the proposers to answer once it moved.
	deletes  map[string]chan deleteResult
	deleteTo int64
	deleted  []chan deleteResult
}

// eagerTicks bounds a new group's eager campaigns (openGroup): half
// the election timeout, after which raft's own timer takes over.
const eagerTicks = 5

// publish reports a partition's state (this leader, its term, the
// replicas in sync) to the metadata group when the image shows another,
// again each second until it does (a proposal may be dropped).
func (g *group) publish() {
	want := PartitionState{Partition: g.name, TopicID: g.topicID, Leader: g.n.cfg.NodeID, Term: g.r.Term(), ISR: g.r.InSync()}
	g.n.mu.Lock()
	cur, ok := g.n.image.Partitions[g.name]
	g.n.mu.Unlock()
	if handed, since := g.r.Handed(); time.Since(since) < electionTimeout(g.n.cfg.Tick) {
		// A new term's first election timeout: the followers may not
		// have answered yet, so the report keeps the ISR it was handed
		// as well (only the report: min.insync.replicas counts InSync);
		// a shrink is published once they had time (review: 6 of 20
		// transfers published an ISR of the leader alone).
		for _, id := range handed {
			if !slices.Contains(want.ISR, id) {
				want.ISR = append(want.ISR, id)
			}
		}
		slices.Sort(want.ISR)
	}
	if ok && cur.same(want) || g.pub.same(want) && time.Since(g.pubAt) < time.Second {
		return
	}
	body, err := json.Marshal(record{Op: "partition_state", Partition: &want})
	if err != nil {
		return
	}
	g.pub, g.pubAt = want, time.Now()
	meta := g.n.meta
	meta.queue(func() { _ = meta.r.ProposeInternal(body) })
}

// checkBrokers, on the metadata group's leader, fences the voters it
// has not heard from (replica.Replica.Active) for SessionTimeout, as
// Kafka's controller fences a broker whose heartbeats stop, and lifts a
// fence once it hears from one again: it proposes a fence record with
// the whole set when the image shows another, again each second until
// it does. A new leader starts with every voter heard from.
func (g *group) checkBrokers() {
	now := time.Now()
	if term := g.r.Term(); g.heardAt == nil || g.heardTerm != term {
		g.heardAt, g.heardTerm = map[uint64]time.Time{}, term
		for id := range g.n.cfg.Voters {
			g.heardAt[id] = now
		}
	}
	for _, id := range g.r.Active() {
		g.heardAt[id] = now
	}
	var fenced []uint64
	g.n.mu.Lock()
	for id, at := range g.heardAt {
		if _, registered := g.n.image.Brokers[id]; registered && now.Sub(at) > g.n.cfg.SessionTimeout {
			fenced = append(fenced, id)
		}
	}
	cur := g.n.image.FencedIDs()
	g.n.mu.Unlock()
	slices.Sort(fenced)
	if slices.Equal(cur, fenced) || slices.Equal(g.fencePub, fenced) && now.Sub(g.fenceAt) < time.Second {
		return
	}
	body, err := json.Marshal(record{Op: "fence", Fenced: fenced})
	if err != nil {
		return
	}
	g.fencePub, g.fenceAt = fenced, now
	if err := g.r.ProposeInternal(body); err == nil && len(fenced) != len(cur) {
		g.n.logger.Info("fencing brokers not heard from", zap.Uint64s("fenced", fenced),
			zap.Duration("session_timeout", g.n.cfg.SessionTimeout))
	}
}

// balance, on a partition's leader that is not its preferred replica,
// hands leadership to the preferred one (AutoLeaderRebalance) when it is
// caught up (every committed entry durable there: raft refuses
// proposals until the transfer is done, so a replica that cannot catch
// up within an election timeout must not be chosen), not fenced, and
// more than LeaderImbalancePercentage percent of the partitions
// preferring its broker are led elsewhere, as Kafka's controller moves
// leaders back to their preferred replicas. Checked every
// LeaderImbalanceCheckInterval from when this replica won leadership;
// after a transfer that did not happen, the next waits twice as long
// (up to 32 intervals).
func (g *group) balance() {
	cfg := &g.n.cfg
	if !cfg.AutoLeaderRebalance || g.preferred == 0 || g.preferred == cfg.NodeID {
		return
	}
	now := time.Now()
	if now.Before(g.nextBalance) {
		return
	}
	if g.transferred { // still leading after handing over: it did not happen
		g.balanceBackoff = min(max(2*g.balanceBackoff, 2), 32)
	}
	g.transferred = false
	g.nextBalance = now.Add(time.Duration(max(g.balanceBackoff, 1)) * cfg.LeaderImbalanceCheckInterval)
	if !g.r.CaughtUp(g.preferred) {
		return
	}
	total, elsewhere, fenced := g.n.preferredCounts(g.preferred)
	if fenced || total == 0 || elsewhere*100 <= total*cfg.LeaderImbalancePercentage {
		return
	}
	g.n.logger.Info("handing leadership to the preferred replica", zap.String("group", g.name), zap.Uint64("to", g.preferred),
		zap.Int("led_elsewhere", elsewhere), zap.Int("preferring_it", total))
	if err := g.transfer(g.preferred); err != nil {
		g.n.logger.Warn("leadership transfer failed", zap.String("group", g.name), zap.Error(err))
		return
	}
	g.transferred = true
}

// transferTicks is how many ticks a leadership transfer this broker
// starts (balance, electPreferred) may stay pending before it is
// cancelled (checkTransfer): raft refuses proposals while one is, up to
// an election timeout (ten ticks), and a transferee in the ISR with a
// slow disk may not catch up in that time at all; a healthy one catches
// up and campaigns within an fsync and a round trip.
const transferTicks = 3

// transfer hands leadership to replica to (raft's leadership transfer),
// to be cancelled by checkTransfer if still pending after
// transferTicks. Group goroutine.
func (g *group) transfer(to uint64) error {
	if err := g.r.TransferLeader(to); err != nil {
		return err
	}
	g.transferUntil = time.Now().Add(transferTicks * g.n.cfg.Tick)
	return nil
}

// checkTransfer cancels a transfer that transfer started and that is
// still pending past its time, so the leader takes produces again.
// Each tick, group goroutine.
func (g *group) checkTransfer(now time.Time) {
	if g.transferUntil.IsZero() || now.Before(g.transferUntil) {
		return
	}
	g.transferUntil = time.Time{}
	if g.r.Transferring() {
		g.n.logger.Info("leadership transfer not done in time; cancelled", zap.String("group", g.name),
			zap.Duration("after", transferTicks*g.n.cfg.Tick))
		if err := g.r.AbortTransfer(); err != nil {
			g.n.logger.Warn("cancelling a leadership transfer failed", zap.String("group", g.name), zap.Error(err))
		}
	}
}

// preferredCounts returns how many partitions prefer broker id (it is
// their first replica), how many of those are led elsewhere (the
// image's partition states), and whether it is fenced; counted once
// per image (balanceCounts), not per group.
func (n *Node) preferredCounts(id uint64) (total, elsewhere int, fenced bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	bc := &n.balanceCounts
	if bc.total == nil || bc.applied != n.image.Applied {
		bc.applied, bc.total, bc.elsewhere = n.image.Applied, map[uint64]int{}, map[uint64]int{}
		for _, t := range n.image.Topics {
			for i, rs := range t.Partitions {
				if len(rs) == 0 {
					continue
				}
				bc.total[rs[0]]++
				if ps, ok := n.image.Partitions[PartitionName(t.Name, int32(i))]; ok && ps.Leader != rs[0] {
					bc.elsewhere[rs[0]]++
				}
			}
		}
	}
	return bc.total[id], bc.elsewhere[id], n.image.Fenced[id]
}

// queue hands f to the group's goroutine; false when its queue is full
// (the caller answers as if the message were lost).
func (g *group) queue(f func()) bool {
	g.workMu.Lock()
	defer g.workMu.Unlock()
	if g.stopped {
		return false
	}
	select {
	case g.work <- f:
		return true
	default:
		return false
	}
}

// sync runs a replica's fsync on a goroutine of its own, so the group
// goes on proposing and writing while it runs (replica.Config.Sync),
// and brings the job back to the group's goroutine. One job is out at a
// time, but one taken back early (before a truncation) may still be on
// its way when the next is out: a send waits its turn, or quit.
func (g *group) sync(j *replica.SyncJob) {
	g.syncs.Add(1)
	go func() {
		defer g.syncs.Done()
		j.Run()
		select {
		case g.synced <- j:
		case <-g.quit: // the goroutine has stopped: nobody takes it back
		}
	}()
}

// stop ends the group's goroutine's work: its replica is stopped (every
// waiting produce answered), nothing more is queued, and what was
// queued runs now, against the stopped replica, so it too is answered
// (a produce's records released) rather than left waiting.
func (g *group) stop() {
	close(g.quit)
	g.syncs.Wait() // no fsync runs once the Node closes the log
	g.r.Stop()
	g.failDeletes(0) // their entries are not applied here any more
	g.workMu.Lock()
	g.stopped = true
	g.workMu.Unlock()
	for {
		select {
		case f := <-g.work:
			f()
		default:
			return
		}
	}
}

// checkCaughtUp sets Node.caughtUp once the metadata group applied the
// commit index a ReadIndex came back with (asked each tick until then,
// in run). Metadata group goroutine.
func (g *group) checkCaughtUp() {
	if ri := g.r.ReadIndexed(); ri > 0 && g.r.Applied() >= ri {
		g.n.caughtUp.Store(true)
		g.n.logger.Info("caught up with the metadata log", zap.Uint64("index", ri))
	}
}

// campaign starts an election (openGroup's eager campaigns); a failure
// is logged, and the replica's own election timer goes on.
func (g *group) campaign() {
	if err := g.r.Campaign(); err != nil {
		g.n.logger.Warn("campaign failed", zap.String("group", g.name), zap.Error(err))
	}
}

func (g *group) status() Status {
	return Status{Leader: g.leader.Load(), Term: g.term.Load(), IsLeader: g.isLeader.Load(),
		LastLeader: g.lastLeader.Load(), LastTerm: g.lastTerm.Load()}
}

// run is the group's goroutine: the only caller of its Replica.
func (g *group) run() {
	defer g.n.wg.Done()
	defer close(g.exited)
	defer g.stop()
	tick := time.NewTicker(g.n.cfg.Tick)
	defer tick.Stop()
	if g.eager > 0 {
		g.queue(g.campaign) // through work, so Process sends its messages at once
	}
	for {
		select {
		case <-g.n.stop:
			return
		case <-g.halt:
			return
		case f := <-g.work:
			f()
		drain:
			for range 256 { // what else is queued goes into the same Ready
				select {
				case f := <-g.work:
					f()
				default:
					break drain
				}
			}
		case j := <-g.synced:
			if err := g.r.Synced(j); err != nil {
				g.failed(err)
				return
			}
		case <-tick.C:
			if err := g.r.Tick(); err != nil {
				g.failed(err)
				return
			}
			if g.eager > 0 {
				g.eager--
				if lead, _ := g.r.Leader(); lead == 0 {
					g.campaign()
				}
			}
			if g == g.n.meta && !g.n.caughtUp.Load() {
				if err := g.r.ReadIndex(); err != nil {
					g.failed(err)
					return
				}
			}
			switch {
			case g != g.n.meta:
				if g.isLeader.Load() {
					g.checkTransfer(time.Now())
					g.publish()
					g.balance()
				}
				g.electPreferred(time.Now()) // also ends a finished one on followers
			case g.isLeader.Load():
				g.checkBrokers()
			}
		}
		if err := g.r.Process(); err != nil {
			g.failed(err)
			return
		}
		if g == g.n.meta && !g.n.caughtUp.Load() {
			g.checkCaughtUp()
		}
		if g.deleteTo > 0 || len(g.deleted) > 0 {
			g.moveLogStart()
		}
		for _, m := range g.r.Outbox() {
			g.n.tr.Send(g.wire, m.To, m.Parts...)
		}
		lead, isLeader := g.r.Leader()
		if isLeader && (!g.isLeader.Load() || g.term.Load() != g.r.Term()) {
			// One line per election won, as Kafka logs leader changes;
			// the leader-stability test counts them.
			g.n.logger.Info("elected leader", zap.String("group", g.name), zap.Uint64("term", g.r.Term()))
			// Rebalancing checks start a check interval from now; a
			// transfer made before this term did happen.
			g.nextBalance, g.transferred, g.balanceBackoff = time.Now().Add(g.n.cfg.LeaderImbalanceCheckInterval), false, 0
			g.transferUntil = time.Time{}
		}
		if !isLeader && len(g.deletes) > 0 {
			g.failDeletes(lead)
		}
		g.leader.Store(lead)
		g.isLeader.Store(isLeader)
		g.term.Store(g.r.Term())
		if lead != 0 {
			g.lastLeader.Store(lead)
			g.lastTerm.Store(g.r.Term())
		}
		if hw := g.p.HighWatermark(); hw != g.hw && g.n.cfg.OnHighWatermark != nil {
			g.hw = hw
			g.n.cfg.OnHighWatermark(g.name)
		}
	}
}

// failed stops a group whose replica failed (a storage error): it
// answers nothing more, and its peers elect without it.
func (g *group) failed(err error) {
	g.isLeader.Store(false)
	g.n.logger.Error("raft group stopped", zap.String("group", g.name), zap.Error(err))
}
