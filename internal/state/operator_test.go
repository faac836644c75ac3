package state

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func elems(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s%d", prefix, i)
	}
	return out
}

func TestRedistributeSplitKeepsEveryElementOnce(t *testing.T) {
	old := [][][]byte{elems("a", 3), elems("b", 0), elems("c", 4)}
	for newP := 1; newP <= 9; newP++ {
		got := Redistribute(SplitDistribute, old, newP)
		seen := map[string]int{}
		minN, maxN := 1<<30, 0
		for _, l := range got {
			minN, maxN = min(minN, len(l)), max(maxN, len(l))
			for _, e := range l {
				seen[string(e)]++
			}
		}
		if len(seen) != 7 || maxN-minN > 1 {
			t.Fatalf("p=%d: %d distinct elements, shares %d..%d", newP, len(seen), minN, maxN)
		}
		for e, n := range seen {
			if n != 1 {
				t.Fatalf("p=%d: %s assigned %d times", newP, e, n)
			}
		}
	}
}

func TestRedistributeUnionGivesAllToEach(t *testing.T) {
	got := Redistribute(UnionDistribute, [][][]byte{elems("a", 2), elems("b", 1)}, 3)
	for i, l := range got {
		if len(l) != 3 {
			t.Fatalf("subtask %d got %d elements, want all 3", i, len(l))
		}
	}
}

func TestOperatorStoreLists(t *testing.T) {
	s := NewOperatorStore()
	l, err := s.List("offsets", SplitDistribute)
	if err != nil {
		t.Fatal(err)
	}
	l.Elements = append(l.Elements, []byte("x"))
	again, _ := s.List("offsets", SplitDistribute)
	if again != l || len(s.Lists()) != 1 {
		t.Fatal("same name did not return the same list")
	}
	if _, err := s.List("offsets", UnionDistribute); !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("err = %v", err)
	}
	if _, err := s.List("", SplitDistribute); err == nil {
		t.Fatal("empty name accepted")
	}
}

func TestSubMillisecondTTLRejected(t *testing.T) {
	b := NewHeapBackend(Options{KeyGroupStart: 0, KeyGroupEnd: 127, MaxParallelism: 128})
	defer b.Close()
	_, err := NewValue(b, ValueDescriptor[int64]{Name: "v", TTL: TTLConfig{TTL: 500 * time.Microsecond}})
	if err == nil || !strings.Contains(err.Error(), "at least 1ms") {
		t.Fatalf("err = %v", err)
	}
}
