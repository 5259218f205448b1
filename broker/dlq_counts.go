package broker

import "github.com/shoal-mq/shoal/broker/share"

// DLQCount is the number of records a share group's share-partition has
// written to its dead-letter topic.
type DLQCount = share.DLQCount

// ShareDLQCounts returns the durable dead-letter counts of group (every
// group if group is ""), sorted: the records each share-partition of the
// group has written to its dead-letter topic (KIP-1191).
func (b *Broker) ShareDLQCounts(group string) ([]DLQCount, error) { return b.shares.DLQCounts(group) }

// ShareDLQTotals returns the dead-letter records written per share group
// (the metric shoal_share_dlq_records_total{group}).
func (b *Broker) ShareDLQTotals() (map[string]int64, error) { return b.shares.DLQTotals() }
