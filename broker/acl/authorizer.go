package acl

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/shoal-mq/shoal/broker/meta"
)

// Request is one authorization question: may Principal, connected from
// Host, do Operation on the resource (Type, Name)? Host is the client's
// IP address in CanonicalHost's form.
type Request struct {
	Principal string
	Host      string
	Operation Operation
	Type      ResourceType
	Name      string
}

// Authorizer holds the ACLs and answers with Kafka's StandardAuthorizer
// semantics:
//   - a super user is allowed everything;
//   - the ACLs that apply are those whose pattern covers the resource
//     (LITERAL equal, LITERAL "*", PREFIXED a prefix of the name), whose
//     principal is the caller's or User:*, and whose host is the
//     caller's or "*";
//   - any applying DENY for the operation (or All) denies, however many
//     ALLOWs apply;
//   - else an applying ALLOW for the operation, for All, or for one that
//     implies it (Read/Write/Delete/Alter imply Describe, AlterConfigs
//     implies DescribeConfigs) allows;
//   - else it is denied, unless allow.everyone.if.no.acl.found is set
//     and no ACL at all covers the resource.
//
// Reads take no lock: the ACLs are an immutable index swapped on every
// change (changes are rare and durable before they are visible).
type Authorizer struct {
	store      *meta.Store // nil: in memory only (tests, benchmarks)
	superUsers map[string]bool
	allowIfNo  bool

	writeMu sync.Mutex // serializes changes across their durable commit
	idx     atomic.Pointer[index]
}

// Options configure an Authorizer.
type Options struct {
	Store                     *meta.Store
	SuperUsers                map[string]bool
	AllowEveryoneIfNoACLFound bool
}

// New loads the stored ACLs.
func New(o Options) (*Authorizer, error) {
	a := &Authorizer{store: o.Store, superUsers: o.SuperUsers, allowIfNo: o.AllowEveryoneIfNoACLFound}
	var all []Binding
	if o.Store != nil {
		err := meta.ScanJSON(o.Store.DB(), meta.PrefixACL, func(_ string, b Binding) error {
			all = append(all, b)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	a.idx.Store(buildIndex(all, nil))
	return a, nil
}

// Authorize answers r.
func (a *Authorizer) Authorize(r Request) bool {
	if a.superUsers[r.Principal] {
		return true
	}
	ix := a.idx.Load()
	rt := ix.byType[r.Type]
	if rt == nil {
		return a.allowIfNo
	}
	allowed, any := false, false
	check := func(es []entry) bool { // false: a DENY applies
		for i := range es {
			e := &es[i]
			any = true
			if e.principal != r.Principal && e.principal != WildcardPrincipal || e.host != r.Host && e.host != Wildcard {
				continue
			}
			if !grants(e.op, r.Operation, e.perm) {
				continue
			}
			if e.perm == Deny {
				return false
			}
			allowed = true
		}
		return true
	}
	if !check(rt.literal[r.Name]) || !check(rt.wildcard) {
		return false
	}
	for _, n := range rt.prefixLens {
		if n > len(r.Name) {
			break
		}
		if !check(rt.prefixed[r.Name[:n]]) {
			return false
		}
	}
	if allowed {
		return true
	}
	return a.allowIfNo && !any
}

// Bindings returns the ACLs f selects, in a stable order.
func (a *Authorizer) Bindings(f Filter) []Binding {
	var out []Binding
	for _, b := range a.idx.Load().all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// Create adds bindings (an existing one is kept once), durably before
// they apply. Every binding must be valid.
func (a *Authorizer) Create(bs []Binding) error {
	for _, b := range bs {
		if err := b.Validate(); err != nil {
			return err
		}
	}
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	cur := a.idx.Load()
	var ops []meta.Op
	next := append([]Binding(nil), cur.all...)
	added := map[Binding]bool{}
	for _, b := range bs {
		if _, has := cur.key[b]; has || added[b] { // a binding is kept once, even if one request names it twice
			continue
		}
		added[b] = true
		v, err := json.Marshal(b)
		if err != nil {
			return err
		}
		ops = append(ops, meta.Op{Key: bindingKey(b), Value: v})
		next = append(next, b)
	}
	if len(ops) == 0 {
		return nil
	}
	if err := a.write(ops); err != nil {
		return err
	}
	a.idx.Store(buildIndex(next, cur.key))
	return nil
}

// Delete removes every binding one of filters selects, durably before
// it stops applying, and returns, per filter, what it removed.
func (a *Authorizer) Delete(filters []Filter) ([][]Binding, error) {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	cur := a.idx.Load()
	out := make([][]Binding, len(filters))
	gone := map[Binding]bool{}
	var ops []meta.Op
	for i, f := range filters {
		for _, b := range cur.all {
			if f.Matches(b) {
				out[i] = append(out[i], b)
				if !gone[b] {
					gone[b] = true
					ops = append(ops, meta.Op{Key: []byte(cur.key[b]), Del: true})
				}
			}
		}
	}
	if len(ops) == 0 {
		return out, nil
	}
	if err := a.write(ops); err != nil {
		return nil, err
	}
	var next []Binding
	for _, b := range cur.all {
		if !gone[b] {
			next = append(next, b)
		}
	}
	a.idx.Store(buildIndex(next, cur.key))
	return out, nil
}

func (a *Authorizer) write(ops []meta.Op) error {
	if a.store == nil {
		return nil
	}
	return a.store.Committer().Write(ops...)
}

// keyEscaper escapes a key's fields ("/" separates them).
var keyEscaper = strings.NewReplacer("%", "%25", "/", "%2F")

// bindingKey is a binding's key: every field, escaped, so that equal
// bindings share one key.
func bindingKey(b Binding) []byte {
	esc := keyEscaper.Replace
	return fmt.Appendf(nil, "%s%d/%d/%s/%s/%s/%d/%d", meta.PrefixACL, b.ResourceType, b.PatternType,
		esc(b.ResourceName), esc(b.Principal), esc(b.Host), b.Operation, b.Permission)
}

// entry is a binding as the index keeps it, under its resource pattern.
type entry struct {
	principal, host string
	op              Operation
	perm            Permission
}

type typeIndex struct {
	literal    map[string][]entry
	wildcard   []entry
	prefixed   map[string][]entry
	prefixLens []int // the lengths of the prefixes present, ascending
}

type index struct {
	all    []Binding
	hosts  []string           // all[i]'s host, CanonicalHost'd
	key    map[Binding]string // each binding's store key
	byType map[ResourceType]*typeIndex
}

// buildIndex indexes all, in key order (Bindings' stable order). known
// holds keys already made (the previous index's), so a change costs
// one key per new binding, not one per binding.
func buildIndex(all []Binding, known map[Binding]string) *index {
	keyed := make([]struct {
		key string
		b   Binding
	}, len(all))
	for i, b := range all {
		k, ok := known[b]
		if !ok {
			k = string(bindingKey(b))
		}
		keyed[i].key, keyed[i].b = k, b
	}
	sort.Slice(keyed, func(i, j int) bool { return keyed[i].key < keyed[j].key })
	for i := range keyed {
		all[i] = keyed[i].b
	}
	ix := &index{all: all, hosts: make([]string, len(all)), key: make(map[Binding]string, len(all)), byType: map[ResourceType]*typeIndex{}}
	for i, b := range all {
		ix.key[b] = keyed[i].key
		ix.hosts[i] = CanonicalHost(b.Host)
		t := ix.byType[b.ResourceType]
		if t == nil {
			t = &typeIndex{literal: map[string][]entry{}, prefixed: map[string][]entry{}}
			ix.byType[b.ResourceType] = t
		}
		e := entry{principal: b.Principal, host: ix.hosts[i], op: b.Operation, perm: b.Permission}
		switch {
		case b.PatternType == Literal && b.ResourceName == Wildcard:
			t.wildcard = append(t.wildcard, e)
		case b.PatternType == Literal:
			t.literal[b.ResourceName] = append(t.literal[b.ResourceName], e)
		default:
			if _, ok := t.prefixed[b.ResourceName]; !ok {
				t.prefixLens = append(t.prefixLens, len(b.ResourceName))
			}
			t.prefixed[b.ResourceName] = append(t.prefixed[b.ResourceName], e)
		}
	}
	for _, t := range ix.byType {
		sort.Ints(t.prefixLens)
		t.prefixLens = uniqInts(t.prefixLens)
	}
	return ix
}

func uniqInts(s []int) []int {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// anyProbe is the resource name AuthorizeAny asks about first, as
// Kafka's authorizeByResourceType does ("hardcode"): a super user, or a
// caller allowed by a wildcard or allow.everyone.if.no.acl.found, is
// allowed whatever the other ACLs say.
const anyProbe = "hardcode"

// AuthorizeAny reports whether principal, from host, may do op on at
// least one resource of type typ, with Kafka's authorizeByResourceType
// rules: allowed if an ALLOW for op (or All; implied operations do not
// count here) on some pattern is not covered by a DENY: a LITERAL "*"
// DENY covers everything, a LITERAL DENY its own name, a PREFIXED DENY
// every pattern that starts with its prefix.
func (a *Authorizer) AuthorizeAny(principal, host string, op Operation, typ ResourceType) bool {
	if a.Authorize(Request{Principal: principal, Host: host, Operation: op, Type: typ, Name: anyProbe}) {
		return true
	}
	denyLit, denyPre := map[string]bool{}, map[string]bool{}
	var allows []Binding
	ix := a.idx.Load()
	for i, b := range ix.all {
		if b.ResourceType != typ || b.Principal != principal && b.Principal != WildcardPrincipal ||
			ix.hosts[i] != host && b.Host != Wildcard || b.Operation != op && b.Operation != All {
			continue
		}
		switch {
		case b.Permission == Deny && b.PatternType == Literal:
			denyLit[b.ResourceName] = true
		case b.Permission == Deny && b.PatternType == Prefixed:
			denyPre[b.ResourceName] = true
		case b.Permission == Allow:
			allows = append(allows, b)
		}
	}
	if denyLit[Wildcard] {
		return false
	}
	for _, b := range allows {
		if b.PatternType == Literal && b.ResourceName == Wildcard {
			return true
		}
	}
next:
	for _, b := range allows {
		if b.PatternType == Literal && denyLit[b.ResourceName] {
			continue
		}
		for n := 1; n <= len(b.ResourceName); n++ {
			if denyPre[b.ResourceName[:n]] {
				continue next
			}
		}
		return true
	}
	return false
}

// CanonicalHost is one spelling of an IP address, so that an ACL's host
// matches however it was written: an IPv6 address in Java's long form
// (0:0:0:0:0:0:0:1, as Kafka's ACLs must spell it) or Go's short one
// (::1) is the same host. Anything that is not an IP ("*", a name) is
// left as it is.
func CanonicalHost(h string) string {
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}
