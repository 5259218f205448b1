//go:build race

package raftlog

// modelSeedsDefault is smaller under the race detector, which slows the
// storage model test about tenfold (the full 100,000 operations run
// without it, as `go test ./...` does).
const modelSeedsDefault = 2
