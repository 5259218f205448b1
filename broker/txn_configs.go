package broker

import (
	"math"
	"strconv"
)

// txnBrokerConfigDefs are the transaction coordinator's broker configs,
// with Kafka's names, defaults and ranges; dynamic here (Kafka reads them
// at start), read when needed.
var txnBrokerConfigDefs = []intBrokerConfigDef{
	{"transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000, 1, math.MaxInt32, "How often transactions open longer than their timeout are looked for and aborted."},
	{"transaction.max.timeout.ms", 900000, 1, math.MaxInt32, "Largest transaction timeout a producer may ask for in InitProducerId; a larger one gets INVALID_TRANSACTION_TIMEOUT."},
	{"transaction.remove.expired.transaction.cleanup.interval.ms", 3600000, 1, math.MaxInt32, "How often transactional ids idle longer than transactional.id.expiration.ms are removed."},
	{"transactional.id.expiration.ms", 604800000, 1, math.MaxInt32, "A transactional id with no transaction and no request for this long is forgotten."},
}

// txnSetting returns a transaction broker config, as milliseconds.
func (b *Broker) txnSetting(name string) int64 {
	for _, d := range txnBrokerConfigDefs {
		if d.name == name {
			if v, ok := b.brokerConfig(name); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= d.lo && n <= d.hi {
					return n
				}
			}
			return d.def
		}
	}
	panic("broker: unknown transaction config " + name)
}
