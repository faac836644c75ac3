package graph

import (
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/network"
)

type builder struct{ g Graph }

func (b *builder) node(name string, p int, src, sink bool, inputs ...*Node) *Node {
	n := b.g.AddNode(&Node{Name: name, Parallelism: p, Source: src, Sink: sink})
	for _, in := range inputs {
		b.g.Connect(in, n, network.PartitionDefault, nil)
	}
	return n
}

func TestChaining(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *builder)
		chain bool
		want  string
	}{{
		name: "forward equal parallelism chains",
		build: func(b *builder) {
			s := b.node("src", 2, true, false)
			m := b.node("map", 2, false, false, s)
			b.node("sink", 2, false, true, m)
		},
		chain: true,
		want:  "0: src -> map -> sink (parallelism 2)\n",
	}, {
		name: "chaining disabled",
		build: func(b *builder) {
			s := b.node("src", 2, true, false)
			b.node("sink", 2, false, true, s)
		},
		want: "0: src (parallelism 2) -FORWARD-> 1\n1: sink (parallelism 2)\n",
	}, {
		name: "parallelism change breaks the chain with a rebalance",
		build: func(b *builder) {
			s := b.node("src", 1, true, false)
			m := b.node("map", 3, false, false, s)
			b.node("sink", 3, false, true, m)
		},
		chain: true,
		want:  "0: src (parallelism 1) -REBALANCE-> 1\n1: map -> sink (parallelism 3)\n",
	}, {
		name: "a hash edge breaks the chain",
		build: func(b *builder) {
			s := b.node("src", 2, true, false)
			k := b.g.AddNode(&Node{Name: "count", Parallelism: 2})
			b.g.Connect(s, k, network.Hash, nil)
			b.node("sink", 2, false, true, k)
		},
		chain: true,
		want:  "0: src (parallelism 2) -HASH-> 1\n1: count -> sink (parallelism 2)\n",
	}, {
		name: "a union input is never chained",
		build: func(b *builder) {
			s1 := b.node("a", 2, true, false)
			s2 := b.node("b", 2, true, false)
			b.node("sink", 2, false, true, s1, s2)
		},
		chain: true,
		want:  "0: a (parallelism 2) -FORWARD-> 2\n1: b (parallelism 2) -FORWARD-> 2\n2: sink (parallelism 2)\n",
	}, {
		name: "fan-out stays in one chain",
		build: func(b *builder) {
			s := b.node("src", 2, true, false)
			b.node("sink1", 2, false, true, s)
			b.node("sink2", 2, false, true, s)
		},
		chain: true,
		want:  "0: src -> sink1 -> sink2 (parallelism 2)\n",
	}, {
		name: "NoChain starts a new chain",
		build: func(b *builder) {
			s := b.node("src", 2, true, false)
			m := b.node("map", 2, false, false, s)
			m.NoChain = true
			b.node("sink", 2, false, true, m)
		},
		chain: true,
		want:  "0: src (parallelism 2) -FORWARD-> 1\n1: map -> sink (parallelism 2)\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := &builder{}
			tc.build(b)
			jg, err := Build(&b.g, Options{Parallelism: 1, Chaining: tc.chain})
			if err != nil {
				t.Fatal(err)
			}
			if got := jg.String(); got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
			for _, v := range jg.Vertices {
				for _, n := range v.Nodes {
					if jg.VertexOf[n] != v {
						t.Fatalf("VertexOf(%s) wrong", n.Name)
					}
				}
			}
		})
	}
}

func TestBuildDefaultsAndValidation(t *testing.T) {
	b := &builder{}
	s := b.node("src", 0, true, false)
	b.node("sink", 0, false, true, s)
	jg, err := Build(&b.g, Options{Parallelism: 3, Chaining: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Parallelism != 3 || s.MaxParallelism != 128 || jg.Vertices[0].Parallelism != 3 {
		t.Fatalf("defaults not applied: p=%d maxP=%d", s.Parallelism, s.MaxParallelism)
	}

	// Every problem is reported at once.
	b = &builder{}
	a := b.node("a", 4, true, false)
	a.UID = "same"
	f := b.g.AddNode(&Node{Name: "fwd", Parallelism: 2, UID: "same"})
	b.g.Connect(a, f, network.Forward, nil)
	big := b.node("big", 300, false, true, f)
	big.MaxParallelism = 128
	b.g.AddNode(&Node{Name: "orphan", Parallelism: 1})
	_, err = Build(&b.g, Options{Parallelism: 1, Chaining: true})
	if err == nil {
		t.Fatal("invalid graph accepted")
	}
	for _, want := range []string{"same uid", "forward edge", "larger than max parallelism", `"orphan" has no input`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
