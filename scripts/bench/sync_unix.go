//go:build unix

package main

import "syscall"

// syncDisks asks the kernel to write back every dirty page (sync(2)).
func syncDisks() { syscall.Sync() }
