// Package kafkaerr maps Shoal's Go errors to Kafka error codes: Code is
// the one table (the log's sentinels, sharegroup's, and the broker's
// refusals below), Refuse wraps a sentinel with the ErrorMessage sent to
// the client, worded like Kafka's where Kafka has one, and Message reads
// it back.
//
// It owns no state and takes no locks: every package under broker/ may
// call it under any lock. It imports log and sharegroup (their sentinels)
// and nothing else of Shoal's.
package kafkaerr
