//go:build !unix

package storage

// probeLocal: no local locks here; the lock is a lease (see lock_other.go).
func probeLocal(string, string) (Holder, bool, error) { return Holder{}, false, errNoFlock }
