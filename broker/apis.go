package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// api is one served Kafka API: the versions we fully implement and the
// handler. Each api_NN_*.go file registers itself in init, declaring its
// versions next to the code that implements them; ApiVersions answers
// from this one table.
type api struct {
	key, min, max int16
	// handle processes a decoded request of a version within [min, max].
	// It returns the response (nil: send none, for acks=0 produce) and an
	// optional wait function the connection's writer calls before
	// encoding the response.
	handle func(c *conn, req kmsg.Request) (kmsg.Response, func())
}

var apis [kmsg.MaxKey + 1]*api

// register adds a handler for key with a typed request. It panics on a
// duplicate registration (a programming error caught by any test).
func register[R kmsg.Request](key, min, max int16, h func(c *conn, req R) (kmsg.Response, func())) {
	if apis[key] != nil {
		panic("broker: api registered twice: " + kmsg.NameForKey(key))
	}
	if probe := kmsg.RequestForKey(key); probe == nil || max > probe.MaxVersion() {
		panic("broker: kmsg cannot encode " + kmsg.NameForKey(key) + " at the registered max version")
	}
	apis[key] = &api{key: key, min: min, max: max, handle: func(c *conn, req kmsg.Request) (kmsg.Response, func()) {
		return h(c, req.(R))
	}}
}

// registerSimple is register for handlers that answer at once.
func registerSimple[R kmsg.Request](key, min, max int16, h func(c *conn, req R) kmsg.Response) {
	register(key, min, max, func(c *conn, req R) (kmsg.Response, func()) { return h(c, req), nil })
}

func apiFor(key int16) *api {
	if key < 0 || int(key) >= len(apis) {
		return nil
	}
	return apis[key]
}

// servedAPIs returns the table sorted by key.
func servedAPIs() []*api {
	var out []*api
	for _, a := range apis {
		if a != nil {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}
