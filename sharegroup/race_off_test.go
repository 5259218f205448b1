//go:build !race

package sharegroup

// fifoRecords is the size of the random ordered-mode test
// (TestOrderedPerGroupFIFO).
const fifoRecords = 10_000

// oracleSeeds is how many seeds TestOrderedWalkOracle runs.
const oracleSeeds = 1500
