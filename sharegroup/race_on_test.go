//go:build race

package sharegroup

// fifoRecords is smaller under the race detector, which slows the
// random ordered-mode test about fivefold.
const fifoRecords = 3_000

// oracleSeeds is smaller under the race detector too (TestOrderedWalkOracle
// took 47 s with 1,500).
const oracleSeeds = 300
