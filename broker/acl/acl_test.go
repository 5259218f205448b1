package acl

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/meta"
)

// modelAuthorize is the rules written as plainly as possible: a linear
// scan over every binding (the reference the index is checked against).
func modelAuthorize(all []Binding, super map[string]bool, allowIfNo bool, r Request) bool {
	if super[r.Principal] {
		return true
	}
	covered, allowed := false, false
	for _, b := range all {
		if b.ResourceType != r.Type || !patternMatches(b, r.Name) {
			continue
		}
		covered = true
		if b.Principal != r.Principal && b.Principal != "User:*" {
			continue
		}
		if b.Host != r.Host && b.Host != "*" {
			continue
		}
		if b.Permission == Deny && (b.Operation == r.Operation || b.Operation == All) {
			return false
		}
		if b.Permission == Allow {
			implied := b.Operation == r.Operation || b.Operation == All ||
				r.Operation == Describe && (b.Operation == Read || b.Operation == Write || b.Operation == Delete || b.Operation == Alter) ||
				r.Operation == DescribeConfigs && b.Operation == AlterConfigs
			if implied {
				allowed = true
			}
		}
	}
	return allowed || allowIfNo && !covered
}

var (
	names      = []string{"orders", "orders-eu", "ord", "payments", "*", "o", "logs.app", "logs."}
	principals = []string{"User:alice", "User:bob", "User:*", "User:CN=carol,OU=eng"}
	hosts      = []string{"*", "10.0.0.1", "10.0.0.2"}
	ops        = []Operation{All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite}
)

func randBinding(rng *rand.Rand) Binding {
	b := Binding{
		ResourceType: []ResourceType{Topic, Group, TransactionalID}[rng.Intn(3)],
		ResourceName: names[rng.Intn(len(names))],
		PatternType:  []PatternType{Literal, Prefixed}[rng.Intn(2)],
		Principal:    principals[rng.Intn(len(principals))],
		Host:         hosts[rng.Intn(len(hosts))],
		Operation:    ops[rng.Intn(len(ops))],
		Permission:   []Permission{Allow, Deny}[rng.Intn(2)],
	}
	if b.PatternType == Prefixed && b.ResourceName == "*" {
		b.PatternType = Literal
	}
	return b
}

func randRequest(rng *rand.Rand) Request {
	name := names[rng.Intn(len(names))]
	if name == "*" {
		name = "other"
	}
	return Request{
		Principal: []string{"User:alice", "User:bob", "User:CN=carol,OU=eng", "User:dave"}[rng.Intn(4)],
		Host:      []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}[rng.Intn(3)],
		Operation: ops[1+rng.Intn(len(ops)-1)],
		Type:      []ResourceType{Topic, Group, TransactionalID}[rng.Intn(3)],
		Name:      name + []string{"", "-x", "2"}[rng.Intn(3)],
	}
}

// TestAuthorizeMatchesModel: random ACL sets and random Create/Delete
// sequences against the plain model (reliability.md T13's property
// test; CVE-2024-27309: after removing ACLs, DENY must still win).
func TestAuthorizeMatchesModel(t *testing.T) {
	for seed := int64(1); seed <= 16; seed++ {
		rng := rand.New(rand.NewSource(seed))
		allowIfNo := seed%2 == 0
		super := map[string]bool{"User:root": true}
		a, err := New(Options{SuperUsers: super, AllowEveryoneIfNoACLFound: allowIfNo})
		require.NoError(t, err)
		model := map[Binding]bool{}
		for step := range 60 {
			if rng.Intn(3) > 0 {
				var bs []Binding
				for range 1 + rng.Intn(4) {
					bs = append(bs, randBinding(rng))
				}
				require.NoError(t, a.Create(bs))
				for _, b := range bs {
					model[b] = true
				}
			} else {
				b := randBinding(rng)
				f := Filter{ResourceType: AnyResource, PatternType: AnyPattern, Operation: AnyOperation, Permission: AnyPermission}
				switch rng.Intn(3) {
				case 0:
					f.ResourceType, f.ResourceName, f.PatternType = b.ResourceType, &b.ResourceName, b.PatternType
				case 1:
					f.Principal, f.Permission = &b.Principal, b.Permission
				case 2:
					f.ResourceType, f.ResourceName, f.PatternType = b.ResourceType, &b.ResourceName, Match
				}
				removed, err := a.Delete([]Filter{f})
				require.NoError(t, err)
				n := 0
				for m := range model {
					if f.Matches(m) {
						delete(model, m)
						n++
					}
				}
				require.Len(t, removed[0], n, "seed %d step %d: removed", seed, step)
			}
			var all []Binding
			for b := range model {
				all = append(all, b)
			}
			require.Len(t, a.Bindings(Filter{ResourceType: AnyResource, PatternType: AnyPattern, Operation: AnyOperation, Permission: AnyPermission}), len(all))
			for range 40 {
				r := randRequest(rng)
				require.Equal(t, modelAuthorize(all, super, allowIfNo, r), a.Authorize(r), "seed %d step %d: %+v over %v", seed, step, r, all)
			}
			require.True(t, a.Authorize(Request{Principal: "User:root", Operation: Alter, Type: Cluster, Name: ClusterName, Host: "h"}))
		}
	}
}

// TestAuthorizeSemantics: the rules one by one, as Kafka's docs state
// them.
func TestAuthorizeSemantics(t *testing.T) {
	a, err := New(Options{})
	require.NoError(t, err)
	alice := func(op Operation, typ ResourceType, name string) bool {
		return a.Authorize(Request{Principal: "User:alice", Host: "10.0.0.1", Operation: op, Type: typ, Name: name})
	}
	require.False(t, alice(Read, Topic, "t"), "no ACL: denied")
	require.NoError(t, a.Create([]Binding{{Topic, "t", Literal, "User:alice", "*", Read, Allow}}))
	require.True(t, alice(Read, Topic, "t"))
	require.True(t, alice(Describe, Topic, "t"), "Read implies Describe")
	require.False(t, alice(Write, Topic, "t"))
	require.False(t, alice(Read, Topic, "t2"), "LITERAL is exact")
	require.NoError(t, a.Create([]Binding{{Topic, "t", Literal, "User:alice", "10.0.0.1", Describe, Deny}}))
	require.True(t, alice(Read, Topic, "t"), "a DENY denies only its operation")
	require.False(t, alice(Describe, Topic, "t"), "DENY wins over the implied ALLOW")
	require.NoError(t, a.Create([]Binding{{Topic, "pay", Prefixed, "User:*", "*", Write, Allow}}))
	require.True(t, alice(Write, Topic, "payments"))
	require.False(t, alice(Write, Topic, "pa"))
	require.NoError(t, a.Create([]Binding{{Group, "*", Literal, "User:alice", "*", All, Allow}}))
	require.True(t, alice(Delete, Group, "any-group"))
	require.NoError(t, a.Create([]Binding{{Topic, "t", Literal, "User:*", "*", AlterConfigs, Allow}}))
	require.True(t, alice(DescribeConfigs, Topic, "t"), "AlterConfigs implies DescribeConfigs")
	require.NoError(t, a.Create([]Binding{{Group, "g", Prefixed, "User:alice", "*", All, Deny}}))
	require.False(t, alice(Read, Group, "g1"), "DENY All wins over ALLOW All")

	open, err := New(Options{AllowEveryoneIfNoACLFound: true})
	require.NoError(t, err)
	require.NoError(t, open.Create([]Binding{{Topic, "locked", Literal, "User:bob", "*", Read, Allow}}))
	req := Request{Principal: "User:alice", Host: "h", Operation: Read, Type: Topic}
	req.Name = "free"
	require.True(t, open.Authorize(req), "no ACL on the resource: allowed")
	req.Name = "locked"
	require.False(t, open.Authorize(req), "an ACL exists on it: the rules apply")
}

// TestCreateKeepsOneCopy: a binding named twice in one CreateAcls, or
// again later, is kept once (found reading the change).
func TestCreateKeepsOneCopy(t *testing.T) {
	a, err := New(Options{})
	require.NoError(t, err)
	b := Binding{Topic, "t", Literal, "User:a", "*", Read, Allow}
	require.NoError(t, a.Create([]Binding{b, b}))
	require.NoError(t, a.Create([]Binding{b}))
	all := Filter{ResourceType: AnyResource, PatternType: AnyPattern, Operation: AnyOperation, Permission: AnyPermission}
	require.Equal(t, []Binding{b}, a.Bindings(all))
}

func TestValidate(t *testing.T) {
	ok := Binding{Topic, "t", Literal, "User:a", "*", Read, Allow}
	require.NoError(t, ok.Validate())
	for _, b := range []Binding{
		{AnyResource, "t", Literal, "User:a", "*", Read, Allow},
		{Topic, "t", Match, "User:a", "*", Read, Allow},
		{Topic, "", Literal, "User:a", "*", Read, Allow},
		{Topic, "*", Prefixed, "User:a", "*", Read, Allow},
		{Cluster, "c", Literal, "User:a", "*", Alter, Allow},
		{Topic, "t", Literal, "alice", "*", Read, Allow},
		{Topic, "t", Literal, "User:a", "", Read, Allow},
		{Topic, "t", Literal, "User:a", "*", AnyOperation, Allow},
		{Topic, "t", Literal, "User:a", "*", Read, AnyPermission},
	} {
		require.ErrorIs(t, b.Validate(), ErrInvalid, "%v", b)
	}
}

// TestACLsDurable: bindings survive a restart of the store.
func TestACLsDurable(t *testing.T) {
	dir := t.TempDir()
	m, err := meta.Open(dir, zap.NewNop())
	require.NoError(t, err)
	a, err := New(Options{Store: m})
	require.NoError(t, err)
	bs := []Binding{{Topic, "a/b%c", Prefixed, "User:x/y", "*", Read, Allow}, {Cluster, ClusterName, Literal, "User:ops", "*", Alter, Allow}}
	require.NoError(t, a.Create(bs))
	_, err = a.Delete([]Filter{{ResourceType: Cluster, PatternType: AnyPattern, Operation: AnyOperation, Permission: AnyPermission}})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	m, err = meta.Open(dir, zap.NewNop())
	require.NoError(t, err)
	defer m.Close()
	a, err = New(Options{Store: m})
	require.NoError(t, err)
	require.Equal(t, bs[:1], a.Bindings(Filter{ResourceType: AnyResource, PatternType: AnyPattern, Operation: AnyOperation, Permission: AnyPermission}))
}

// BenchmarkAuthorize10k: one check among 10,000 ACLs (the issue's
// target: under 1 µs): literal, prefixed and wildcard bindings over
// 2,000 topics and 100 principals.
func BenchmarkAuthorize10k(b *testing.B) {
	a, err := New(Options{})
	require.NoError(b, err)
	rng := rand.New(rand.NewSource(1))
	var bs []Binding
	for i := range 10_000 {
		pt, name := Literal, fmt.Sprintf("topic-%04d", rng.Intn(2000))
		if i%10 == 0 {
			pt, name = Prefixed, name[:8]
		}
		bs = append(bs, Binding{Topic, name, pt, fmt.Sprintf("User:u%d", rng.Intn(100)), "*", ops[rng.Intn(len(ops))], Allow})
	}
	bs = append(bs, Binding{Topic, "*", Literal, "User:u7", "*", Describe, Deny})
	require.NoError(b, a.Create(bs))
	reqs := make([]Request, 1024)
	for i := range reqs {
		reqs[i] = Request{Principal: fmt.Sprintf("User:u%d", rng.Intn(100)), Host: "10.0.0.1", Operation: Read, Type: Topic,
			Name: fmt.Sprintf("topic-%04d", rng.Intn(2000)) + strings.Repeat("x", rng.Intn(3))}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		a.Authorize(reqs[i&1023])
	}
}

// TestAuthorizeAny: Kafka's authorizeByResourceType (what InitProducerId
// uses to let Write on any topic stand in for IdempotentWrite): an ALLOW
// on some pattern counts unless a DENY covers it.
func TestAuthorizeAny(t *testing.T) {
	cases := []struct {
		name string
		acls []Binding
		want bool
	}{
		{"none", nil, false},
		{"literal allow", []Binding{{Topic, "t", Literal, "User:alice", "*", Write, Allow}}, true},
		{"All counts", []Binding{{Topic, "t", Literal, "User:alice", "*", All, Allow}}, true},
		{"implied operations do not", []Binding{{Topic, "t", Literal, "User:alice", "*", Read, Allow}}, false},
		{"another principal's", []Binding{{Topic, "t", Literal, "User:bob", "*", Write, Allow}}, false},
		{"wildcard principal", []Binding{{Topic, "t", Literal, "User:*", "*", Write, Allow}}, true},
		{"another host", []Binding{{Topic, "t", Literal, "User:alice", "10.9.9.9", Write, Allow}}, false},
		{"denied by the same literal", []Binding{
			{Topic, "t", Literal, "User:alice", "*", Write, Allow},
			{Topic, "t", Literal, "User:alice", "*", Write, Deny}}, false},
		{"a literal deny of another name", []Binding{
			{Topic, "t", Literal, "User:alice", "*", Write, Allow},
			{Topic, "u", Literal, "User:alice", "*", Write, Deny}}, true},
		{"denied by a covering prefix", []Binding{
			{Topic, "pay-1", Literal, "User:alice", "*", Write, Allow},
			{Topic, "pay", Prefixed, "User:alice", "*", Write, Deny}}, false},
		{"a prefixed allow under a shorter deny", []Binding{
			{Topic, "pay-eu", Prefixed, "User:alice", "*", Write, Allow},
			{Topic, "pay", Prefixed, "User:*", "*", All, Deny}}, false},
		{"a deny of a longer prefix leaves the allow", []Binding{
			{Topic, "pay", Prefixed, "User:alice", "*", Write, Allow},
			{Topic, "pay-eu", Prefixed, "User:alice", "*", Write, Deny}}, true},
		{"a wildcard deny", []Binding{
			{Topic, "t", Literal, "User:alice", "*", Write, Allow},
			{Topic, "*", Literal, "User:alice", "*", Write, Deny}}, false},
		{"a wildcard allow", []Binding{{Topic, "*", Literal, "User:alice", "*", Write, Allow}}, true},
		{"other resource types", []Binding{{Group, "t", Literal, "User:alice", "*", Write, Allow}}, false},
	}
	for _, tc := range cases {
		a, err := New(Options{})
		require.NoError(t, err)
		require.NoError(t, a.Create(tc.acls))
		require.Equal(t, tc.want, a.AuthorizeAny("User:alice", "10.0.0.1", Write, Topic), tc.name)
	}
	su, err := New(Options{SuperUsers: map[string]bool{"User:alice": true}})
	require.NoError(t, err)
	require.NoError(t, su.Create([]Binding{{Topic, "*", Literal, "User:alice", "*", Write, Deny}}))
	require.True(t, su.AuthorizeAny("User:alice", "h", Write, Topic), "a super user, whatever the DENYs")
	open, err := New(Options{AllowEveryoneIfNoACLFound: true})
	require.NoError(t, err)
	require.True(t, open.AuthorizeAny("User:alice", "h", Write, Topic), "allow.everyone.if.no.acl.found with no ACLs")
}

// TestHostSpellings: an IPv6 ACL host matches the client whether it is
// written in Java's long form (as Kafka's ACLs spell it) or Go's short
// one; a DENY written either way applies.
func TestHostSpellings(t *testing.T) {
	a, err := New(Options{})
	require.NoError(t, err)
	require.NoError(t, a.Create([]Binding{
		{Topic, "t", Literal, "User:alice", "*", Read, Allow},
		{Topic, "t", Literal, "User:alice", "0:0:0:0:0:0:0:1", Read, Deny},
		{Topic, "u", Literal, "User:alice", "2001:db8::7", Read, Allow},
	}))
	req := func(host, name string) Request {
		return Request{Principal: "User:alice", Host: CanonicalHost(host), Operation: Read, Type: Topic, Name: name}
	}
	require.False(t, a.Authorize(req("::1", "t")), "the long-form DENY covers ::1")
	require.True(t, a.Authorize(req("127.0.0.1", "t")))
	require.True(t, a.Authorize(req("2001:0db8:0:0:0:0:0:7", "u")))
	require.False(t, a.Authorize(req("2001:db8::8", "u")))
	require.False(t, a.AuthorizeAny("User:alice", "::1", Read, Topic), "from ::1 the only ALLOW that applies is denied")
	require.True(t, a.AuthorizeAny("User:alice", "127.0.0.1", Read, Topic))
}
