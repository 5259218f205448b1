package quota

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQuotaScope(t *testing.T) {
	t.Parallel()
	for bucket, want := range map[string]string{
		"b|broker.request.rate":                          "broker",
		"t|producer.byte.rate|orders":                    "topic",
		"s|workers":                                      "share-group",
		"request_rate|client-id=chatty&":                 "client-id",
		"producer_byte_rate|user=ANONYMOUS&client-id=a&": "user+client-id",
		"connection_creation_rate|ip=127.0.0.1&":         "ip",
	} {
		require.Equal(t, want, quotaScope(bucket), bucket)
	}
}
