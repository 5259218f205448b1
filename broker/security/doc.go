// Package security is how a connection says who it is: the listeners
// (Kafka's listeners, advertised.listeners and
// listener.security.protocol.map), each listener's TLS (PEM key and
// trust stores re-read when their files change, ssl.client.auth, the
// TLS versions and suites) and the principal of a connection (a client
// certificate's subject DN through ssl.principal.mapping.rules, else
// User:ANONYMOUS). The security configs keep Kafka's names; Keys is
// their table, and any of them may be set per listener with Kafka's
// listener.name.<name>. prefix (Settings.For).
//
// Model: the root parses the configs once at start (ParseEndpoints,
// ParseProtocolMap, Settings.Validate), builds a ServerTLS per TLS
// listener, wraps each accepted connection in tls.Server with its
// Config, and after the handshake asks Principal. Nothing here opens a
// socket or keeps a connection.
//
// # Locks
//
// ServerTLS.mu guards the current tls.Config and the files' stamps; it
// is held while a changed file is read and parsed (a handshake waits
// for that), never while calling out. It is a leaf: no other lock is
// taken under it, and it may be taken under none of Shoal's locks but
// the handshake's own goroutine's.
package security
