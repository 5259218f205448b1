//go:build !linux && !darwin

package broker

// diskSpace is unknown on this platform (DescribeLogDirs v4 answers -1).
func diskSpace(dir string) (total, usable int64) { return -1, -1 }
