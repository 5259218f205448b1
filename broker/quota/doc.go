// Package quota holds client quotas and rate limits: the entity configs
// of DescribeClientQuotas and AlterClientQuotas, persisted in the
// metadata store, and the token buckets every scope is charged to.
//
// Entities are Kafka's (KIP-546): user, client-id, user+client-id and
// ip, each name either given or the default (a null name). Shoal has no
// authentication, so every connection's user is Kafka's unauthenticated
// principal, ANONYMOUS: a quota on user ANONYMOUS or on the default user
// applies to every client.
//
// Keys: Kafka's producer_byte_rate, consumer_byte_rate,
// request_percentage, controller_mutation_rate (user / client-id
// entities) and connection_creation_rate (ip), plus Shoal's request_rate
// (requests/s), a burst for each rate named <rate>_burst (in the rate's
// unit; unset: one second of the rate) and quota_mode (0 throttle, 1
// reject). As a Shoal extension the ip entity also takes the byte and
// request rates.
//
// Resolution, per key and per entity kind, the specific name before the
// default as in Kafka: user+client-id takes the first entity setting the
// key among (u, c), (u, default client), (default user, c), (default
// user, default client); user among (u), (default user); client-id among
// (c), (default client); ip among (ip), (default ip). The matched entity,
// its default names replaced by the connection's own, names the token
// bucket: a default client-id quota gives each client-id its own bucket.
// The burst and quota_mode come from the same entity.
//
// Composition (issue 6, where Kafka instead applies only the most
// specific of its eight user/client-id entities): every applicable scope
// has its own bucket — the user+client-id, user, client-id and ip ones
// above, the broker-wide one (broker.producer.byte.rate,
// broker.consumer.byte.rate, broker.request.rate), and per topic (topic
// configs producer.byte.rate, consumer.byte.rate) — and a request is
// charged to all of them, so the tightest limit decides. In throttle mode a request is always accepted
// and the response's ThrottleTimeMs (with the connection muted as long)
// pays back the debt; in reject mode a request that the bucket cannot
// cover is refused before anything is done (see produceQuota in the
// root's quota_conn.go, and the README for the error per API).
//
// Ownership and locks: Manager.writeMu serialises Alter and is held
// across its badger write; Manager.cfgMu guards the entity configs
// (written under writeMu after the metadata store), Manager.mu the token
// buckets, ConnCounts.mu the open connection counts. The last three are
// leaves: held briefly, never during I/O, and no lock of Shoal's is taken
// under them (the throttle observer New takes runs under Manager.mu and
// takes only the Prometheus client's own), so any package may call a
// Manager under any of its own locks (the
// share-partition's message-group limiter owns its own TokenBuckets under
// its share-partition lock). It imports meta and kafkaerr.
package quota
