package broker

import "math"

// quotaBrokerConfigDefs are the broker configs of the broker-wide rate
// limits and of the connection limits, all dynamic (IncrementalAlterConfigs
// on the BROKER resource) and read at each use. The rates are Shoal's
// (0: unlimited; the .burst companions 0: one second of the rate);
// max.connections and max.connections.per.ip are Kafka's.
var quotaBrokerConfigDefs = []intBrokerConfigDef{
	{"broker.consumer.byte.rate", 0, 0, math.MaxInt64, "Fetch bytes per second served by this broker to all clients together (0: unlimited); over it fetches are throttled."},
	{"broker.consumer.byte.rate.burst", 0, 0, math.MaxInt64, "Burst of broker.consumer.byte.rate in bytes (0: one second of the rate)."},
	{"broker.producer.byte.rate", 0, 0, math.MaxInt64, "Produce bytes per second accepted by this broker from all clients together (0: unlimited); over it produces are throttled."},
	{"broker.producer.byte.rate.burst", 0, 0, math.MaxInt64, "Burst of broker.producer.byte.rate in bytes (0: one second of the rate)."},
	{"broker.request.rate", 0, 0, math.MaxInt64, "Requests per second from all clients together (0: unlimited); over it connections are throttled."},
	{"broker.request.rate.burst", 0, 0, math.MaxInt64, "Burst of broker.request.rate in requests (0: one second of the rate)."},
	{"max.connections", math.MaxInt32, 0, math.MaxInt32, "Connections this broker keeps open; beyond it new connections wait to be accepted until one closes."},
	{"max.connections.per.ip", math.MaxInt32, 0, math.MaxInt32, "Connections from one IP address; one more is closed at once."},
}
