// Package protocol is Shoal's view of the Kafka wire format. It is a leaf:
// it imports only the standard library and franz-go's kmsg (which has no
// dependencies of its own), never another Shoal package.
//
// Request and response bodies are encoded and decoded by kmsg, which knows
// every API's versions, including flexible versions and tagged fields
// (KIP-482). This package adds what kmsg leaves to a broker:
//
//   - framing: every message is a big-endian int32 size followed by that
//     many bytes (ReadFrame rejects a size above the configured limit
//     before allocating);
//   - request headers v1 and v2 (ParseRequest), and response headers v0
//     and v1 (AppendResponse);
//   - the RecordBatch v2 header layout (batch.go), so the log can assign
//     offsets by patching bytes instead of re-encoding.
//
// Frame layout of a request:
//
//	+--------+--------+---------+---------------+-----------+-------------+------+
//	| size   | apiKey | version | correlationID | clientID  | tagged (v2) | body |
//	| int32  | int16  | int16   | int32         | nullable  | uvarint n + |      |
//	|        |        |         |               | string16  | fields      |      |
//	+--------+--------+---------+---------------+-----------+-------------+------+
//
// and of a response:
//
//	+--------+---------------+------------------------------+------+
//	| size   | correlationID | tagged fields (flexible only,| body |
//	| int32  | int32         | never for ApiVersions)       |      |
//	+--------+---------------+------------------------------+------+
//
// Decoders never panic on hostile input; FuzzParseRequest checks it.
package protocol
