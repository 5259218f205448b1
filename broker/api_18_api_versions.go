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

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { registerSimple(18, 0, 4, handleApiVersions) }

func apiVersionsResponse() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	for _, a := range servedAPIs() {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

func handleApiVersions(c *conn, req *kmsg.ApiVersionsRequest) kmsg.Response {
	return apiVersionsResponse()
}
