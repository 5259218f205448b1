package share

// Share-group delivery rate limits: the group configs
// share.delivery.rate.limit (records per second, 0 = unlimited; the
// burst is one second of it) and share.delivery.rate.limit.scope.
//
// Scope group (here): one token bucket per share group, in the
// quota.Manager, bounds how many records the group's ShareFetch requests
// acquire together. A ShareFetch asks for a grant before acquiring and
// settles it after: records granted but not acquired are refunded, and
// records beyond the grant (batch_optimized acquires whole log batches)
// are charged as debt, so the rate holds over time. With no tokens the
// fetch acquires nothing and long-polls until the bucket refills (or its
// MaxWaitMs ends), so consumers slow down without errors.
//
// Scope message-group (mgroups.go, messageGroupLimiterLocked):
// one bucket per (share-partition, message group), under the
// share-partition's lock, asked by the state machine's GroupLimiter for
// each message group it picks from, in fair and ordered modes; this
// group-wide bucket then steps aside.

import (
	"time"

	"github.com/shoal-mq/shoal/broker/configs"
)

// shareDeliveryLimit returns group's delivery rate limit (records/s, 0:
// unlimited) and whether its scope is message-group.
func (c *Coordinator) shareDeliveryLimit(group string) (rate int64, perMessageGroup bool) {
	over := c.configs.overrides(group)
	rate = configs.Int(c.groupConfigValue(over, "share.delivery.rate.limit"), 0)
	return rate, c.groupConfigValue(over, "share.delivery.rate.limit.scope") == "message-group"
}

// shareDeliveryGrant grants up to want records to a ShareFetch of group
// under the group-scope limit. settle must be called with the records
// actually acquired. With nothing granted, retry says when a token is
// there.
func (c *Coordinator) shareDeliveryGrant(group string, want int) (granted int, retry time.Duration, settle func(got int)) {
	rate, perMessageGroup := c.shareDeliveryLimit(group)
	if rate <= 0 || perMessageGroup {
		return want, 0, func(int) {}
	}
	key := "s|" + group
	granted, retry = c.o.Quotas.Grant(key, float64(rate), want)
	return granted, retry, func(got int) { c.o.Quotas.Settle(key, float64(rate), granted, got) }
}
