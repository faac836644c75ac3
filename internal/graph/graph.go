// Package graph turns the stream graph a job declared into the job graph the
// runtime schedules.
//
// The stream graph has one Node per operator (source, transformation, sink)
// and one Edge per connection, with the partitioner that decides how records
// cross it. Build chains nodes into job vertices: a forward edge between
// nodes of equal parallelism, whose target has no other input, becomes a
// direct method call inside one task instead of a network exchange. Every
// other edge becomes a network exchange between the vertices' subtasks.
//
// The package is pure data: the operators themselves are opaque (Node.Impl)
// and built by the runtime.
package graph

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/network"
)

// Node is one operator of the stream graph.
type Node struct {
	// ID is the node's position in Graph.Nodes; inputs always have smaller IDs.
	ID int
	// Name is shown in logs, errors and metrics.
	Name string
	// UID identifies the operator's state across versions of the job; empty
	// means derived from the node's position.
	UID string
	// Parallelism is the number of subtasks; 0 means the job default.
	Parallelism int
	// MaxParallelism is the number of key groups; 0 means derived from
	// Parallelism.
	MaxParallelism int
	// MaxParallelismDerived is set by Build when MaxParallelism was not
	// given and was derived from the parallelism: a restore may then
	// adopt the snapshot's max parallelism instead, as Flink does.
	MaxParallelismDerived bool
	// Source and Sink mark the graph's ends.
	Source, Sink bool
	// NoChain starts a new chain at this node even where it could be chained
	// to its input.
	NoChain bool
	// Inputs and Outputs are the node's edges, in the order they were added.
	Inputs, Outputs []*Edge
	// Impl is the operator's implementation; graph never looks inside.
	Impl any
}

// Edge connects two nodes.
type Edge struct {
	From, To *Node
	// Output is the output of From the edge reads: 0 is the main output,
	// higher numbers are side outputs.
	Output int
	// Input is the input of To the edge feeds: 0, or 1 for the second
	// input of a two-input operator.
	Input       int
	Partitioner network.Partitioner
	// Timestamped edges carry every record's event timestamp.
	Timestamped bool
	// Impl carries what the partitioner needs (the key selector of a hash
	// edge); graph never looks inside.
	Impl any
}

// Graph is a stream graph under construction.
type Graph struct {
	Nodes []*Node
}

// AddNode appends n, assigning its ID.
func (g *Graph) AddNode(n *Node) *Node {
	n.ID = len(g.Nodes)
	g.Nodes = append(g.Nodes, n)
	return n
}

// Connect adds an edge from -> to.
func (g *Graph) Connect(from, to *Node, p network.Partitioner, impl any) *Edge {
	e := &Edge{From: from, To: to, Partitioner: p, Impl: impl}
	from.Outputs = append(from.Outputs, e)
	to.Inputs = append(to.Inputs, e)
	return e
}

// Vertex is a chain of nodes run by one task per subtask.
type Vertex struct {
	// ID is the vertex's position in JobGraph.Vertices (topological order).
	ID int
	// Nodes are the chained operators, head first, each after its input.
	Nodes []*Node
	// Parallelism is the chain's parallelism.
	Parallelism int
	// Inputs are the stream edges entering the chain's head over the network;
	// Outputs are the stream edges leaving any node of the chain over the
	// network.
	Inputs, Outputs []*Edge
}

// Head is the chain's first node.
func (v *Vertex) Head() *Node { return v.Nodes[0] }

// Name joins the chained nodes' names as Flink does: "a -> b -> c".
func (v *Vertex) Name() string {
	names := make([]string, len(v.Nodes))
	for i, n := range v.Nodes {
		names[i] = n.Name
	}
	return strings.Join(names, " -> ")
}

// JobGraph is the chained graph.
type JobGraph struct {
	// Vertices in topological order: every vertex after its inputs.
	Vertices []*Vertex
	// VertexOf maps every node to its vertex.
	VertexOf map[*Node]*Vertex
}

// Options controls Build.
type Options struct {
	// Parallelism replaces a node's Parallelism of 0.
	Parallelism int
	// MaxParallelism replaces a node's MaxParallelism of 0; 0 derives it from
	// the node's parallelism.
	MaxParallelism int
	// Chaining enables operator chaining.
	Chaining bool
}

// Build resolves defaults, validates the graph and chains it. Every problem
// found is reported, joined into one error.
func Build(g *Graph, opts Options) (*JobGraph, error) {
	var errs []error
	uids := make(map[string]*Node)
	for _, n := range g.Nodes {
		if n.Parallelism == 0 {
			n.Parallelism = opts.Parallelism
		}
		if n.MaxParallelism == 0 {
			n.MaxParallelism = opts.MaxParallelism
		}
		if n.MaxParallelism == 0 && n.Parallelism > 0 {
			n.MaxParallelism = keygroup.DefaultMaxParallelism(n.Parallelism)
			n.MaxParallelismDerived = true
		}
		if err := keygroup.Validate(n.Parallelism, n.MaxParallelism); err != nil {
			errs = append(errs, fmt.Errorf("operator %q: %w", n.Name, err))
		}
		if n.UID == "" {
			n.UID = fmt.Sprintf("auto-%d-%s", n.ID, n.Name)
		} else if other, dup := uids[n.UID]; dup {
			errs = append(errs, fmt.Errorf("operators %q and %q have the same uid %q; uids must be unique", other.Name, n.Name, n.UID))
		}
		uids[n.UID] = n
		if n.Source && len(n.Inputs) > 0 {
			errs = append(errs, fmt.Errorf("source %q has inputs", n.Name))
		}
		if !n.Source && len(n.Inputs) == 0 {
			errs = append(errs, fmt.Errorf("operator %q has no input", n.Name))
		}
		if n.Sink && len(n.Outputs) > 0 {
			errs = append(errs, fmt.Errorf("sink %q has outputs", n.Name))
		}
	}
	for _, n := range g.Nodes {
		for _, e := range n.Inputs {
			if e.From.ID >= n.ID {
				errs = append(errs, fmt.Errorf("edge %q -> %q goes backwards", e.From.Name, n.Name))
			}
			if e.Partitioner == network.PartitionDefault {
				e.Partitioner = network.Rebalance
				if e.From.Parallelism == n.Parallelism {
					e.Partitioner = network.Forward
				}
			}
			if e.Partitioner == network.Forward && e.From.Parallelism != n.Parallelism {
				errs = append(errs, fmt.Errorf("forward edge %q -> %q needs equal parallelism, have %d and %d; use rebalance or rescale",
					e.From.Name, n.Name, e.From.Parallelism, n.Parallelism))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	jg := &JobGraph{VertexOf: make(map[*Node]*Vertex)}
	for _, n := range g.Nodes { // IDs are topological, so inputs are placed first
		if in := n.Inputs; len(in) == 1 && chainable(in[0], opts.Chaining) {
			v := jg.VertexOf[in[0].From]
			v.Nodes = append(v.Nodes, n)
			jg.VertexOf[n] = v
			continue
		}
		v := &Vertex{ID: len(jg.Vertices), Nodes: []*Node{n}, Parallelism: n.Parallelism, Inputs: n.Inputs}
		jg.Vertices = append(jg.Vertices, v)
		jg.VertexOf[n] = v
	}
	for _, v := range jg.Vertices {
		for _, n := range v.Nodes {
			for _, e := range n.Outputs {
				if jg.VertexOf[e.To] != v {
					v.Outputs = append(v.Outputs, e)
				}
			}
		}
	}
	return jg, nil
}

func chainable(e *Edge, enabled bool) bool {
	return enabled && e.Partitioner == network.Forward && !e.To.NoChain && !e.To.Source && !e.From.Sink &&
		e.From.Parallelism == e.To.Parallelism
}

// String renders the job graph, one vertex per line, for logs and tests.
func (jg *JobGraph) String() string {
	var sb strings.Builder
	for _, v := range jg.Vertices {
		fmt.Fprintf(&sb, "%d: %s (parallelism %d)", v.ID, v.Name(), v.Parallelism)
		for _, e := range v.Outputs {
			fmt.Fprintf(&sb, " -%s-> %d", e.Partitioner, jg.VertexOf[e.To].ID)
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// VertexUID is a vertex's REST id, as Flink's JobVertexID: 32 hex digits
// derived from its head operator's uid (stable across runs of the same
// job), or from job, the vertex's position and the head's name when the
// head has none. The REST API and the metrics' vertex_id label use it.
func VertexUID(job string, v *Vertex) string {
	key := v.Head().UID
	if key == "" {
		key = fmt.Sprintf("%s/%d/%s", job, v.ID, v.Head().Name)
	}
	return hexDigest(key)
}

// OperatorUID is an operator's id, as Flink's OperatorID: 32 hex digits
// derived from its uid, or from job, its position and its name when it has
// none. The metrics' operator_id label uses it.
func OperatorUID(job string, n *Node) string {
	key := n.UID
	if key == "" {
		key = fmt.Sprintf("%s/node-%d/%s", job, n.ID, n.Name)
	}
	return hexDigest(key)
}

func hexDigest(key string) string {
	sum := md5.Sum([]byte(key))
	return hex.EncodeToString(sum[:])
}
