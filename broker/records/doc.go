// Package records looks inside RecordBatch v2 bytes, for the few broker
// features that must: dead-letter copies read their source records, the
// dedup window inspects keys and headers, message groups classify records
// and share fetches trim batches. The produce and fetch paths never use
// it to decode: they move batches verbatim.
//
// It decodes (EachBatch, EachRecord), decompresses with a bound on what
// one batch may inflate to (MaxDecompressed: a client's small "zip bomb"
// must not make the broker allocate gigabytes), compresses (Compress),
// re-encodes (AppendRecord, EncodeBatch, AppendRewritten) and pools the
// read buffers of fetches (GetBuffer, PutBuffer).
//
// It owns no state but its pools (safe for concurrent use) and takes no
// locks: any package may call it under any lock. It imports protocol and
// nothing else of Shoal's.
package records
