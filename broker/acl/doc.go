// Package acl is Kafka's authorization model (StandardAuthorizer): ACL
// bindings on Topic, Group, Cluster, TransactionalId, DelegationToken
// and User resources with LITERAL ("*" included) and PREFIXED patterns,
// every operation, ALLOW and DENY, the filters of DescribeAcls and
// DeleteAcls, and Authorize, which answers one request. Authorizer's
// comment has the rules. Bindings are stored in the metadata store
// (meta/acl/...) and are durable before they apply.
//
// The root asks Authorize (and AuthorizeAny, Kafka's
// authorizeByResourceType) from each handler (broker/authz.go); this
// package knows nothing of requests or connections.
//
// # Locks
//
// Authorize takes no lock: it reads an immutable index through an
// atomic pointer. Create and Delete hold Authorizer.writeMu across
// their durable commit and then swap the index; writeMu is a leaf
// (no other lock of Shoal's is taken under it but the metadata store's
// committer, which takes none of ours).
package acl
