//go:build !race

package sharegroup

// fifoRecords is the size of the random ordered-mode test
// (TestOrderedPerGroupFIFO).
const fifoRecords = 10_000

// groupSeeds is how many seeds TestGroupsRandomized runs.
const groupSeeds = 1500
