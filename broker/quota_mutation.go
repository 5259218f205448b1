package broker

// controller_mutation_rate (KIP-599): partitions created, added or
// deleted per second by CreateTopics, CreatePartitions and DeleteTopics,
// per user / client-id entity (and ip, a Shoal extension).
//
// Throttle mode (quota_mode 0): every mutation is done, charged, and the
// response throttles the client (connection muted), as Kafka's
// permissive mode. Reject mode (quota_mode 1), on the versions that
// define THROTTLING_QUOTA_EXCEEDED (CreateTopics v6+, DeleteTopics v5+,
// CreatePartitions v3+): while the quota is already exceeded, a topic
// gets THROTTLING_QUOTA_EXCEEDED with the response's throttle time
// saying when to retry, as Kafka's strict mode; the mutation that
// crosses the quota is still done. Older versions are throttled.
// ValidateOnly requests are neither refused nor charged.

import (
	"time"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/quota"
)

// mutationAllowed refuses a mutation while a reject-mode
// controller_mutation_rate is exceeded, on versions that can say so.
func (c *conn) mutationAllowed(strict, validateOnly bool) error {
	if !strict || validateOnly {
		return nil
	}
	limits := c.b.quotas.ClientLimits(nil, quota.ControllerMutationRate, c.ident(), 0)
	if len(limits) == 0 {
		return nil
	}
	rejected, wait := c.b.quotas.Debt(time.Now(), limits)
	if !rejected {
		return nil
	}
	c.quota.hint = max(c.quota.hint, wait)
	return kafkaerr.Refuse(kafkaerr.ErrThrottlingQuota, "The throttling quota has been exceeded.")
}

// mutationCharge charges n partition mutations that were done.
func (c *conn) mutationCharge(strict bool, n int) {
	if n <= 0 {
		return
	}
	limits := c.b.quotas.ClientLimits(nil, quota.ControllerMutationRate, c.ident(), float64(n))
	if len(limits) == 0 {
		return
	}
	if !strict {
		c.quota.owe(c.b.chargeThrottleOnly(time.Now(), limits))
		return
	}
	c.quota.owe(c.b.quotas.Take(time.Now(), limits))
}
