//go:build !race

package broker

// churnRecords is the record count of TestGroupChurn (issue 3: 200,000).
const churnRecords = 200_000
