//go:build !unix

package state

import "time"

// pebbleProcessCPU is not measured on this platform.
func pebbleProcessCPU() time.Duration { return 0 }
