// Package keygroup maps keys to key groups and key groups to subtasks.
//
// A key group is the unit in which keyed state is partitioned, snapshotted and
// moved when a job is rescaled. A job has maxParallelism key groups; a key
// belongs to group murmur3_32(key bytes) mod maxParallelism, where the key
// bytes are the key codec's encoding. Subtask i of p owns the contiguous
// range of groups Range(i, maxParallelism, p), and group g belongs to
// subtask g*p/maxParallelism. These are Apache Flink's formulas
// (KeyGroupRangeAssignment), so the same reasoning about rescaling applies.
package keygroup

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

const (
	// LowerBoundMaxParallelism is the smallest derived max parallelism.
	LowerBoundMaxParallelism = 128
	// UpperBoundMaxParallelism is the largest max parallelism there can be.
	UpperBoundMaxParallelism = 1 << 15
)

// DefaultMaxParallelism derives the max parallelism of an operator of
// parallelism p as Flink does: min(max(roundUpPow2(p + p/2), 128), 32768).
func DefaultMaxParallelism(p int) int {
	return min(max(roundUpPow2(p+p/2), LowerBoundMaxParallelism), UpperBoundMaxParallelism)
}

func roundUpPow2(x int) int {
	if x <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(x-1))
}

// Validate checks that parallelism p fits max parallelism maxP.
func Validate(p, maxP int) error {
	switch {
	case maxP < 1 || maxP > UpperBoundMaxParallelism:
		return fmt.Errorf("max parallelism %d must be between 1 and %d", maxP, UpperBoundMaxParallelism)
	case p < 1:
		return fmt.Errorf("parallelism %d must be at least 1", p)
	case p > maxP:
		return fmt.Errorf("parallelism %d is larger than max parallelism %d", p, maxP)
	}
	return nil
}

// Of returns the key group of a key given its encoded bytes.
func Of(key []byte, maxP int) int {
	return int(Murmur3(key, 0) % uint32(maxP))
}

// OperatorIndex returns the subtask, of p, that owns key group kg.
func OperatorIndex(kg, maxP, p int) int { return kg * p / maxP }

// Range returns the inclusive range [start, end] of key groups owned by
// subtask i of p.
func Range(i, maxP, p int) (start, end int) {
	return (i*maxP + p - 1) / p, ((i+1)*maxP - 1) / p
}

// Murmur3 is MurmurHash3's x86 32-bit hash of data with seed.
func Murmur3(data []byte, seed uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	h := seed
	n := len(data)
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		data = data[4:]
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch len(data) {
	case 3:
		k ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(data[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
