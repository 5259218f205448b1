//go:build race

package broker

// churnRecords is smaller under the race detector, which slows the
// clients about tenfold.
const churnRecords = 30_000
