//go:build race

package sharegroup

// fifoRecords is smaller under the race detector, which slows the
// random ordered-mode test about fivefold.
const fifoRecords = 3_000

// groupSeeds is smaller under the race detector too (TestGroupsRandomized
// took 47 s with 1,500).
const groupSeeds = 300
