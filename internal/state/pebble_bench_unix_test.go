//go:build unix

package state

import (
	"syscall"
	"time"
)

// pebbleProcessCPU returns the CPU time the process has used (user and
// system, all threads, Pebble's background work included).
func pebbleProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
