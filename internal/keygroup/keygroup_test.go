package keygroup

import (
	"fmt"
	"testing"
)

func TestMurmur3Vectors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		seed uint32
		want uint32
	}{
		{"", 0, 0},
		{"", 1, 0x514e28b7},
		{"hello", 0, 0x248bfa47},
		{"The quick brown fox jumps over the lazy dog", 0, 0x2e4ff723},
		{"abc", 0, 0xb3dd93fa},
		{"abcd", 0, 0x43ed676a},
	} {
		if got := Murmur3([]byte(tc.in), tc.seed); got != tc.want {
			t.Errorf("Murmur3(%q, %d) = %#x, want %#x", tc.in, tc.seed, got, tc.want)
		}
	}
}

func TestDefaultMaxParallelism(t *testing.T) {
	for p, want := range map[int]int{1: 128, 4: 128, 85: 128, 86: 256, 100: 256, 1000: 2048, 30000: 32768} {
		if got := DefaultMaxParallelism(p); got != want {
			t.Errorf("DefaultMaxParallelism(%d) = %d, want %d", p, got, want)
		}
	}
}

// Every key group is owned by exactly one subtask, the ranges are contiguous
// and agree with OperatorIndex.
func TestRangesPartitionKeyGroups(t *testing.T) {
	for _, maxP := range []int{1, 7, 128, 1000} {
		for p := 1; p <= min(maxP, 40); p++ {
			next := 0
			for i := range p {
				start, end := Range(i, maxP, p)
				if start != next {
					t.Fatalf("maxP=%d p=%d subtask %d starts at %d, want %d", maxP, p, i, start, next)
				}
				for kg := start; kg <= end; kg++ {
					if got := OperatorIndex(kg, maxP, p); got != i {
						t.Fatalf("maxP=%d p=%d: key group %d in range of %d but OperatorIndex says %d", maxP, p, kg, i, got)
					}
				}
				next = end + 1
			}
			if next != maxP {
				t.Fatalf("maxP=%d p=%d: ranges end at %d", maxP, p, next)
			}
		}
	}
}

func TestOfSpreadsKeys(t *testing.T) {
	const maxP = 128
	counts := make([]int, maxP)
	for i := range 128000 {
		counts[Of(fmt.Appendf(nil, "key-%d", i), maxP)]++
	}
	for kg, c := range counts {
		if c < 700 || c > 1300 {
			t.Fatalf("key group %d got %d of 128000 keys; murmur3 should spread about 1000 each", kg, c)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := Validate(4, 128); err != nil {
		t.Fatal(err)
	}
	for _, tc := range [][2]int{{0, 128}, {5, 4}, {1, 0}, {1, 40000}} {
		if Validate(tc[0], tc[1]) == nil {
			t.Errorf("Validate(%d, %d) accepted", tc[0], tc[1])
		}
	}
}
