//go:build !race

package raftlog

// modelSeedsDefault: 10 seeds of 10,000 operations (criterion C14).
const modelSeedsDefault = 10
