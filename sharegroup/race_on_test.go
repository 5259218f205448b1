//go:build race

package sharegroup

// fifoRecords is smaller under the race detector, which slows the
// random ordered-mode test about fivefold.
const fifoRecords = 3_000
