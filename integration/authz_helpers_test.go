package integration

// The machinery of the authorization matrix (authz_matrix_test.go): a
// case is one API (or one form of it) with the ACLs it needs; cells are
// generated from it (every need granted, under each pattern type; each
// need missing; each need granted and also denied) plus explicit
// variants; every cell has a principal and resources of its own, so the
// ACLs of one cell cannot satisfy another's request.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// azRes names one of a cell's resources.
type azRes int8

const (
	azTopic   azRes = iota // the cell's topic "a"
	azTopic2               // a second topic "b", for cases that need two
	azGroup                // the cell's group
	azTxn                  // the cell's transactional id
	azCluster              // kafka-cluster
)

func (r azRes) String() string {
	return [...]string{"Topic", "Topic2", "Group", "TransactionalId", "Cluster"}[r]
}

func (r azRes) aclType() kmsg.ACLResourceType {
	switch r {
	case azTopic, azTopic2:
		return kmsg.ACLResourceTypeTopic
	case azGroup:
		return kmsg.ACLResourceTypeGroup
	case azTxn:
		return kmsg.ACLResourceTypeTransactionalId
	}
	return kmsg.ACLResourceTypeCluster
}

// azPat is how a binding names its resource: the resource's own name
// (LITERAL), a prefix of it no other cell's names share (PREFIXED), or
// LITERAL "*".
type azPat int8

const (
	azLit azPat = iota
	azPre
	azAny
)

func (p azPat) String() string { return [...]string{"LITERAL", "PREFIXED", "LITERAL *"}[p] }

var azAllPats = []azPat{azLit, azPre, azAny}

// azACL is one binding for the cell's principal, on host "*" unless
// host is set.
type azACL struct {
	res  azRes
	op   kmsg.ACLOperation
	pat  azPat
	deny bool
	host string
}

func azAllow(res azRes, op kmsg.ACLOperation, pat azPat) azACL {
	return azACL{res: res, op: op, pat: pat}
}

func azDeny(res azRes, op kmsg.ACLOperation, pat azPat) azACL {
	return azACL{res: res, op: op, pat: pat, deny: true}
}

func (a azACL) String() string {
	perm := "ALLOW"
	if a.deny {
		perm = "DENY"
	}
	on := ""
	if a.host != "" {
		on = " on " + a.host
	}
	if a.res == azCluster {
		return fmt.Sprintf("%s %s Cluster%s", perm, a.op, on)
	}
	return fmt.Sprintf("%s %s %s(%s)%s", perm, a.op, a.res, a.pat, on)
}

// azNeed is one ACL an API needs: missing or denied, the cell observes
// denied instead of the case's ok.
type azNeed struct {
	res azRes
	op  kmsg.ACLOperation
	// pats are the patterns this need may be granted with (nil: all
	// three); a case with two topics keeps "*" off, which would grant
	// the other topic too.
	pats   []azPat
	denied string
}

func (n azNeed) patterns() []azPat {
	if n.res == azCluster {
		return []azPat{azLit}
	}
	if n.pats == nil {
		return azAllPats
	}
	return n.pats
}

// azVariant is an explicit cell: these ACLs, this observation.
type azVariant struct {
	name string
	acls []azACL
	want string
}

// azCase is one API form. probe issues the request as the cell's
// principal and reports what it saw as a string (the codes the table
// speaks of, in a fixed order); with every need granted it must be ok.
type azCase struct {
	api    string
	topics int32 // partitions of the cell's topic "a" (0: not created)
	topic2 bool  // topic "b" too, same partitions
	// caps pin the cell's client to at most these versions.
	caps  map[int16]int16
	setup func(x *azCtx) error // as admin, before any probe runs
	probe func(x *azCtx) (string, error)
	needs []azNeed
	ok    string
	// byType: the needs are checked with authorizeByResourceType
	// (KIP-679), where only a DENY at least as broad as the ALLOW
	// cancels it; denial cells use the ALLOW's own pattern.
	byType bool
	extra  []azVariant
	// anonymous cells connect to the PLAINTEXT listener, as
	// User:ANONYMOUS, which every such cell shares: their variants hold
	// no ACLs.
	anonymous bool
}

// azCell is one principal with its ACLs, one request, one expectation.
type azCell struct {
	n       int
	c       *azCase
	variant string
	acls    []azACL
	want    string

	// setup state
	pid   int64
	epoch int16
}

func (c *azCell) user() string { return fmt.Sprintf("az%03d", c.n) }

func (c *azCell) principal() string {
	if c.c.anonymous {
		return "User:ANONYMOUS"
	}
	return "User:" + c.user()
}

func (c *azCell) password() string { return "pw-" + c.user() }

// prefix is the PREFIXED pattern for r: it covers r's name and no name
// of another cell or of the cell's other topic.
func (c *azCell) prefix(r azRes) string {
	if r == azTopic2 {
		return fmt.Sprintf("az%03d-b.", c.n)
	}
	return fmt.Sprintf("az%03d-a.", c.n)
}

func (c *azCell) name(r azRes) string {
	switch r {
	case azTopic:
		return c.prefix(r) + "topic"
	case azTopic2:
		return c.prefix(r) + "topic"
	case azGroup:
		return c.prefix(r) + "group"
	case azTxn:
		return c.prefix(r) + "txn"
	}
	return "kafka-cluster"
}

func (c *azCell) T() string  { return c.name(azTopic) }
func (c *azCell) T2() string { return c.name(azTopic2) }
func (c *azCell) G() string  { return c.name(azGroup) }
func (c *azCell) X() string  { return c.name(azTxn) }

func (c *azCell) creation(a azACL) kmsg.CreateACLsRequestCreation {
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType = a.res.aclType()
	cr.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
	switch {
	case a.res == azCluster:
		cr.ResourceName = "kafka-cluster"
	case a.pat == azAny:
		cr.ResourceName = "*"
	case a.pat == azPre:
		cr.ResourceName = c.prefix(a.res)
		cr.ResourcePatternType = kmsg.ACLResourcePatternTypePrefixed
	default:
		cr.ResourceName = c.name(a.res)
	}
	cr.Principal, cr.Host, cr.Operation = c.principal(), "*", a.op
	if a.host != "" {
		cr.Host = a.host
	}
	cr.PermissionType = kmsg.ACLPermissionTypeAllow
	if a.deny {
		cr.PermissionType = kmsg.ACLPermissionTypeDeny
	}
	return cr
}

// allowed is the ACL model (broker/acl's rules, restated) for a
// resource named name of type rt: listings are checked against it, so
// a listing that shows what the cell may not see is caught whatever
// the name.
func (c *azCell) allowed(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) bool {
	match := func(a azACL) bool {
		if a.res.aclType() != rt {
			return false
		}
		switch {
		case a.res == azCluster:
			return name == "kafka-cluster"
		case a.pat == azAny:
			return true
		case a.pat == azPre:
			return strings.HasPrefix(name, c.prefix(a.res))
		}
		return name == c.name(a.res)
	}
	ok := false
	for _, a := range c.acls {
		if !match(a) || (a.host != "" && a.host != "127.0.0.1") {
			continue
		}
		if a.deny && (a.op == op || a.op == kmsg.ACLOperationAll) {
			return false
		}
		if a.deny {
			continue
		}
		switch {
		case a.op == op, a.op == kmsg.ACLOperationAll:
			ok = true
		case op == kmsg.ACLOperationDescribe && slices.Contains([]kmsg.ACLOperation{kmsg.ACLOperationRead,
			kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter}, a.op):
			ok = true
		case op == kmsg.ACLOperationDescribeConfigs && a.op == kmsg.ACLOperationAlterConfigs:
			ok = true
		}
	}
	return ok
}

// cells expands a case: every need granted under each pattern type the
// needs allow; each need missing (the others granted); each need
// granted and denied as well, the DENY under another pattern (or the
// same one, byType), naming operation All every other time unless
// another need shares the resource; then the explicit variants.
func (cs *azCase) cells(next func() int) []*azCell {
	var out []*azCell
	add := func(variant, want string, acls []azACL) {
		out = append(out, &azCell{n: next(), c: cs, variant: variant, acls: acls, want: want})
	}
	pick := func(n azNeed, i int) azPat {
		ps := n.patterns()
		return ps[i%len(ps)]
	}
	for _, p := range azAllPats {
		var acls []azACL
		used := false
		for _, n := range cs.needs {
			q := azLit
			if slices.Contains(n.patterns(), p) {
				q, used = p, true
			}
			acls = append(acls, azAllow(n.res, n.op, q))
		}
		if len(cs.needs) == 0 || (!used && p != azLit) {
			continue
		}
		add("granted, "+p.String(), cs.ok, acls)
	}
	for i, n := range cs.needs {
		var acls []azACL
		for j, m := range cs.needs {
			if j != i {
				acls = append(acls, azAllow(m.res, m.op, pick(m, i+j)))
			}
		}
		add(fmt.Sprintf("without %s %s", n.op, n.res), n.denied, acls)
	}
	for i, n := range cs.needs {
		var acls []azACL
		var grant azPat
		for j, m := range cs.needs {
			p := pick(m, i+j+1)
			if j == i {
				grant = p
			}
			acls = append(acls, azAllow(m.res, m.op, p))
		}
		dp := grant
		if !cs.byType {
			dp = pick(n, int(grant)+1)
		}
		op := n.op
		shared := false
		for j, m := range cs.needs {
			shared = shared || (j != i && m.res == n.res)
		}
		if i%2 == 1 && !shared {
			op = kmsg.ACLOperationAll
		}
		d := azDeny(n.res, op, dp)
		add(fmt.Sprintf("%s %s(%s) and %s", n.op, n.res, grant, d), n.denied, append(acls, d))
	}
	for _, v := range cs.extra {
		add(v.name, v.want, v.acls)
	}
	return out
}

// azEnv is the matrix's broker, its admin (a super user) and the ids of
// the topics the cells use.
type azEnv struct {
	e     *saslEnv
	ctx   context.Context
	admin *kgo.Client
	mu    sync.Mutex
	ids   map[string][16]byte
}

func (a *azEnv) id(topic string) [16]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids[topic]
}

// azCtx is what setups and probes run with: the cell and a broker to
// send to (the admin's for a setup, the cell principal's for a probe).
type azCtx struct {
	context.Context
	a  *azEnv
	c  *azCell
	br *kgo.Broker
}

// do sends req and returns its answer.
func (x *azCtx) do(req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(x, 15*time.Second)
	defer cancel()
	resp, err := x.br.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// admin is x with the admin's broker.
func (x *azCtx) admin() *azCtx {
	y := *x
	y.br = x.a.admin.SeedBrokers()[0]
	return &y
}

// codes formats error codes as cells observe them.
func codes(cs ...int16) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = fmt.Sprint(c)
	}
	return strings.Join(s, ",")
}

// azCaps is kgo's default version table with the case's caps.
func azCaps(caps map[int16]int16) *kversion.Versions {
	v := kversion.Stable()
	for k, max := range caps {
		v.SetMaxKeyVersion(k, max)
	}
	return v
}

// runAuthzMatrix runs cases on e (whose authorizer is on and whose
// super user is admin): it makes every cell's user, topics and ACLs in
// a few batched requests, runs the setups, then the probes, and fails
// the test with every cell that did not observe what it should.
func runAuthzMatrix(t *testing.T, e *saslEnv, cases []*azCase) {
	ctx := testContext(t)
	a := &azEnv{e: e, ctx: ctx, ids: map[string][16]byte{},
		admin: e.client(t, e.sasl, nil, scram512("admin", adminPassword), kgo.MaxVersions(azCaps(map[int16]int16{24: 3})))}
	n := 0
	next := func() int { n++; return n }
	var cells []*azCell
	for _, cs := range cases {
		cells = append(cells, cs.cells(next)...)
	}

	// Users, in one AlterUserScramCredentials. (The ACLs follow on the
	// same connection: the broker once kept the salts aliased to the
	// connection's frame buffer, and the next request overwrote them.)
	adm := kadm.NewClient(a.admin)
	var ups []kadm.UpsertSCRAM
	for _, c := range cells {
		ups = append(ups, kadm.UpsertSCRAM{User: c.user(), Mechanism: kadm.ScramSha512, Iterations: 4096, Password: c.password()})
	}
	sr, err := adm.AlterUserSCRAMs(ctx, nil, ups)
	require.NoError(t, err)
	require.NoError(t, sr.Error())

	// Topics, in one CreateTopics per partition count.
	byParts := map[int32][]string{}
	for _, c := range cells {
		if c.c.topics > 0 {
			byParts[c.c.topics] = append(byParts[c.c.topics], c.T())
			if c.c.topic2 {
				byParts[c.c.topics] = append(byParts[c.c.topics], c.T2())
			}
		}
	}
	for parts, names := range byParts {
		res, err := adm.CreateTopics(ctx, parts, 1, nil, names...)
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err, "create %s: %s", r.Topic, r.ErrMessage)
			a.ids[r.Topic] = [16]byte(r.ID)
		}
	}

	// ACLs, in one CreateAcls.
	creq := kmsg.NewPtrCreateACLsRequest()
	for _, c := range cells {
		require.False(t, c.c.anonymous && len(c.acls) > 0, "%s: User:ANONYMOUS is shared, its cells hold no ACLs", c.c.api)
		for _, acl := range c.acls {
			creq.Creations = append(creq.Creations, c.creation(acl))
		}
	}
	cresp, err := creq.RequestWith(ctx, a.admin)
	require.NoError(t, err)
	require.Len(t, cresp.Results, len(creq.Creations))
	for i, r := range cresp.Results {
		require.Zero(t, r.ErrorCode, "CreateAcls %+v: %s %v", creq.Creations[i], codeName(r.ErrorCode), r.ErrorMessage)
	}

	// Setups, then probes, eight at a time.
	parallel := func(f func(c *azCell) error) []error {
		errs := make([]error, len(cells))
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for i, c := range cells {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				errs[i] = f(c)
			}()
		}
		wg.Wait()
		return errs
	}
	errs := parallel(func(c *azCell) error {
		if c.c.setup == nil {
			return nil
		}
		return c.c.setup((&azCtx{Context: ctx, a: a, c: c}).admin())
	})
	for i, err := range errs {
		require.NoError(t, err, "setup of cell %d (%s, %s)", cells[i].n, cells[i].c.api, cells[i].variant)
	}
	got := make([]string, len(cells))
	errs = parallel(func(c *azCell) error {
		opts := []kgo.Opt{kgo.SeedBrokers(e.sasl), kgo.SASL(scram512(c.user(), c.password())),
			kgo.MaxVersions(azCaps(c.c.caps)), kgo.RequestRetries(0)}
		if c.c.anonymous {
			opts = []kgo.Opt{kgo.SeedBrokers(e.plain), kgo.MaxVersions(azCaps(c.c.caps)), kgo.RequestRetries(0)}
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		got[c.n-1], err = c.c.probe(&azCtx{Context: ctx, a: a, c: c, br: cl.SeedBrokers()[0]})
		return err
	})

	var failures []string
	apis := map[string]bool{}
	for i, c := range cells {
		apis[c.c.api] = true
		switch {
		case errs[i] != nil:
			failures = append(failures, fmt.Sprintf("cell %d %s [%s] as %s: error %v (want %q)", c.n, c.c.api, c.variant, c.principal(), errs[i], c.want))
		case got[i] != c.want:
			failures = append(failures, fmt.Sprintf("cell %d %s [%s] as %s: got %q, want %q", c.n, c.c.api, c.variant, c.principal(), got[i], c.want))
		}
	}
	t.Logf("authorization matrix: %d cells over %d API forms, %d as expected", len(cells), len(apis), len(cells)-len(failures))
	if len(failures) > 0 {
		t.Errorf("%d of %d cells not as expected:\n%s", len(failures), len(cells), strings.Join(failures, "\n"))
	}
}
