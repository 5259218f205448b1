package broker

// ApiVersions (18).
//
// Behavior: lists every API and version range from the one table in
// apis.go. A request of a version we do not serve is answered (by conn)
// with a v0 response carrying UNSUPPORTED_VERSION and the same list, so
// the client retries with a version we know (KIP-511). The response
// header is always v0, even for flexible versions (protocol.AppendResponse).
//
// Version notes: v3 adds client software name/version (KIP-511), which
// we accept and ignore, and the flexible encoding; v4 only signals that
// the client understands the UNSUPPORTED_VERSION downgrade.
//
// Features (KIP-584, tagged fields of v3+): Shoal supports and finalizes
// transaction.version 2, as a Kafka 4 cluster created at that level
// does. A client that sees it runs KIP-890 part 2 transactions: Produce
// v12 and TxnOffsetCommit v5 add their partition or group to the
// transaction themselves, and EndTxn v5 moves the producer epoch on
// every transaction. Clients that do not know the feature ignore it.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { registerSimple(18, 0, 4, handleApiVersions) }

func apiVersionsResponse() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	for _, a := range servedAPIs() {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	for _, f := range features {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.level, f.level
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
	// The epoch of the finalized levels: they never change, so one epoch.
	resp.FinalizedFeaturesEpoch = 1
	return resp
}

// features are the cluster features Shoal supports, each finalized at
// level. Kafka's names and levels.
var features = []struct {
	name            string
	min, max, level int16
}{
	// KIP-890 part 2: 0 and 1 are the older transaction protocols,
	// which clients that do not know the feature keep using.
	{"transaction.version", 0, 2, 2},
}

func handleApiVersions(c *conn, req *kmsg.ApiVersionsRequest) kmsg.Response {
	return apiVersionsResponse()
}
