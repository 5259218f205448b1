package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is Kafka's ACL resource type (the wire numbers).
type ResourceType int8

const (
	AnyResource     ResourceType = 1
	Topic           ResourceType = 2
	Group           ResourceType = 3
	Cluster         ResourceType = 4
	TransactionalID ResourceType = 5
	DelegationToken ResourceType = 6
	User            ResourceType = 7
)

// PatternType is how a binding's resource name matches.
type PatternType int8

const (
	AnyPattern PatternType = 1 // filters only
	Match      PatternType = 2 // filters only: every pattern that matches the name
	Literal    PatternType = 3
	Prefixed   PatternType = 4
)

// Operation is Kafka's ACL operation.
type Operation int8

const (
	AnyOperation    Operation = 1 // filters only
	All             Operation = 2
	Read            Operation = 3
	Write           Operation = 4
	Create          Operation = 5
	Delete          Operation = 6
	Alter           Operation = 7
	Describe        Operation = 8
	ClusterAction   Operation = 9
	DescribeConfigs Operation = 10
	AlterConfigs    Operation = 11
	IdempotentWrite Operation = 12
	CreateTokens    Operation = 13
	DescribeTokens  Operation = 14
)

// Permission is ALLOW or DENY.
type Permission int8

const (
	AnyPermission Permission = 1 // filters only
	Deny          Permission = 2
	Allow         Permission = 3
)

// Wildcard is the literal resource name, principal and host matching
// every one.
const Wildcard = "*"

// ClusterName is the one name of the cluster resource.
const ClusterName = "kafka-cluster"

// WildcardPrincipal matches every user principal.
const WildcardPrincipal = "User:*"

// Binding is one ACL: "Principal P is Allowed/Denied Operation O from
// Host H on Resource R matching Pattern".
type Binding struct {
	ResourceType ResourceType `json:"resource_type"`
	ResourceName string       `json:"resource_name"`
	PatternType  PatternType  `json:"pattern_type"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

func (b Binding) String() string {
	return fmt.Sprintf("(%d %q %d) %s@%s op %d perm %d", b.ResourceType, b.ResourceName, b.PatternType, b.Principal, b.Host, b.Operation, b.Permission)
}

// ErrInvalid is a binding CreateAcls refuses (Kafka's
// InvalidRequestException); its message says why.
var ErrInvalid = errors.New("invalid ACL")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Validate checks a binding to be created, as Kafka's CreateAcls does.
func (b Binding) Validate() error {
	switch {
	case b.ResourceType < Topic || b.ResourceType > User:
		return invalid("resource type %d cannot be used in an ACL", b.ResourceType)
	case b.PatternType != Literal && b.PatternType != Prefixed:
		return invalid("pattern type %d cannot be used in an ACL (LITERAL or PREFIXED)", b.PatternType)
	case b.ResourceName == "":
		return invalid("the resource name is empty")
	case b.PatternType == Prefixed && b.ResourceName == Wildcard:
		return invalid("a PREFIXED pattern of %q is not allowed; use a LITERAL %q", Wildcard, Wildcard)
	case b.ResourceType == Cluster && (b.ResourceName != ClusterName || b.PatternType != Literal):
		return invalid("the cluster resource is LITERAL %q", ClusterName)
	case b.Operation < All || b.Operation > DescribeTokens:
		return invalid("operation %d cannot be used in an ACL", b.Operation)
	case b.Permission != Allow && b.Permission != Deny:
		return invalid("permission %d cannot be used in an ACL (ALLOW or DENY)", b.Permission)
	case b.Host == "":
		return invalid("the host is empty (use %q for every host)", Wildcard)
	}
	typ, name, ok := strings.Cut(b.Principal, ":")
	if !ok || typ == "" || name == "" {
		return invalid("principal %q is not type:name (User:alice)", b.Principal)
	}
	return nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls). A nil string
// matches any value; AnyResource, AnyPattern, AnyOperation and
// AnyPermission match any; Match selects every binding whose pattern
// matches Name (LITERAL equal or "*", PREFIXED a prefix of it).
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// ValidateFilter checks a filter as Kafka does.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType < AnyResource || f.ResourceType > User:
		return invalid("resource type %d cannot be used in a filter", f.ResourceType)
	case f.PatternType < AnyPattern || f.PatternType > Prefixed:
		return invalid("pattern type %d cannot be used in a filter", f.PatternType)
	case f.Operation < AnyOperation || f.Operation > DescribeTokens:
		return invalid("operation %d cannot be used in a filter", f.Operation)
	case f.Permission < AnyPermission || f.Permission > Allow:
		return invalid("permission %d cannot be used in a filter", f.Permission)
	}
	return nil
}

// Matches reports whether f selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != AnyResource && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.PatternType {
	case AnyPattern:
		if f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	case Match:
		if f.ResourceName != nil && !patternMatches(b, *f.ResourceName) {
			return false
		}
	default:
		if f.PatternType != b.PatternType || f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	}
	return (f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == AnyOperation || f.Operation == b.Operation) &&
		(f.Permission == AnyPermission || f.Permission == b.Permission)
}

// patternMatches reports whether b's resource pattern covers name.
func patternMatches(b Binding, name string) bool {
	switch b.PatternType {
	case Literal:
		return b.ResourceName == name || b.ResourceName == Wildcard
	case Prefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

// grants reports whether an entry with operation has allows op: the
// same operation, All, or (for ALLOW only) one that implies it: Read,
// Write, Delete and Alter imply Describe; AlterConfigs implies
// DescribeConfigs (Kafka's IMPLIES_DESCRIBE, IMPLIES_DESCRIBE_CONFIGS).
func grants(has, op Operation, perm Permission) bool {
	if has == op || has == All {
		return true
	}
	if perm == Deny {
		return false // a DENY denies only its exact operation (or All)
	}
	switch op {
	case Describe:
		return has == Read || has == Write || has == Delete || has == Alter
	case DescribeConfigs:
		return has == AlterConfigs
	}
	return false
}

var resourceNames = map[ResourceType]string{
	AnyResource: "ANY", Topic: "TOPIC", Group: "GROUP", Cluster: "CLUSTER",
	TransactionalID: "TRANSACTIONAL_ID", DelegationToken: "DELEGATION_TOKEN", User: "USER",
}

// String is Kafka's name of the resource type (TOPIC, GROUP, ...).
func (t ResourceType) String() string {
	if s, ok := resourceNames[t]; ok {
		return s
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(t))
}

var operationNames = map[Operation]string{
	AnyOperation: "ANY", All: "ALL", Read: "READ", Write: "WRITE", Create: "CREATE", Delete: "DELETE",
	Alter: "ALTER", Describe: "DESCRIBE", ClusterAction: "CLUSTER_ACTION", DescribeConfigs: "DESCRIBE_CONFIGS",
	AlterConfigs: "ALTER_CONFIGS", IdempotentWrite: "IDEMPOTENT_WRITE", CreateTokens: "CREATE_TOKENS",
	DescribeTokens: "DESCRIBE_TOKENS",
}

// String is Kafka's name of the operation (READ, WRITE, ...).
func (o Operation) String() string {
	if s, ok := operationNames[o]; ok {
		return s
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(o))
}

// supported is, per resource type, the operations Kafka reports in
// KIP-430 authorized-operation sets (AclEntry.supportedOperations).
var supported = map[ResourceType][]Operation{
	Topic:           {Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs},
	Group:           {Read, Describe, Delete, DescribeConfigs, AlterConfigs},
	Cluster:         {Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe},
	TransactionalID: {Describe, Write},
	DelegationToken: {Describe},
	User:            {CreateTokens, DescribeTokens},
}

// Supported is the operations that apply to resources of type t.
func Supported(t ResourceType) []Operation { return supported[t] }
