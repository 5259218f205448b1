// Package raftnet carries raft messages between brokers (issue 29,
// docs/CLUSTER.md): one outbound TCP connection per peer, on which this
// broker sends every group's messages to that peer, and the inbound
// connections on which peers send theirs. Messages are opaque bytes
// (broker/replica marshals them) tagged with their group's name; raft's
// types never reach this package.
//
// # Wire format
//
// The dialer opens with a hello, then sends frames until the connection
// breaks. Big-endian:
//
//	hello: magic "SHRN" | version u8 (1) | cluster id length u16 | cluster id
//	       | from node u64 | to node u64
//	frame: length u32 (of what follows) | group length u16 | group | message
//
// A receiver closes a connection whose hello names another cluster, is
// not addressed to it, or comes from a node it does not know, and one
// with a frame it cannot parse or longer than MaxFrame: raft recovers
// lost messages, so a connection is never worth saving from bad input.
//
// # Delivery
//
// Send never blocks: it queues the message for the peer's writer
// goroutine, which writes queued frames through a buffer and flushes
// when the queue runs dry, so one flush carries whatever accumulated
// meanwhile, for all groups. A queue over its byte bound drops the new
// message (raft resends); a broken connection drops what it held and is
// redialled with backoff. Inbound frames go to the Handler on the
// connection's reader goroutine, in order per connection; the handler
// must not block for long (it hands the message to the group's
// goroutine).
//
// # Locks
//
// Transport.mu guards the peer table and the inbound connection set;
// each peer's mu guards its queue. Neither is held while doing I/O.
package raftnet
