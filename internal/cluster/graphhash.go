package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/task"
)

// GraphHash fingerprints a job graph's shape: its vertices with their
// chained operators (names, uids, parallelism, max parallelism) and their
// input edges (partitioner, producer). The job manager and every task
// manager must build the same graph from the same spec; a difference
// (another binary, another configuration) is refused.
func GraphHash(jg *graph.JobGraph) string {
	h := sha256.New()
	for _, v := range jg.Vertices {
		fmt.Fprintf(h, "v%d p%d\n", v.ID, v.Parallelism)
		for _, n := range v.Nodes {
			fmt.Fprintf(h, " n %q %q p%d m%d\n", n.Name, n.UID, n.Parallelism, n.MaxParallelism)
		}
		for _, e := range v.Inputs {
			fmt.Fprintf(h, " in %q->%q %v\n", e.From.UID, e.To.UID, e.Partitioner)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// slotsNeeded is the number of slots a job takes with slot sharing: its
// highest vertex parallelism.
func slotsNeeded(jg *graph.JobGraph) int {
	n := 0
	for _, v := range jg.Vertices {
		n = max(n, v.Parallelism)
	}
	return n
}

// taskInfos lists every subtask of jg, named as the task package names
// them.
func taskInfos(jg *graph.JobGraph) []task.TaskInfo {
	var out []task.TaskInfo
	for _, v := range jg.Vertices {
		for i := range v.Parallelism {
			out = append(out, task.TaskInfo{Vertex: v.ID, Subtask: i, Name: fmt.Sprintf("%s (%d/%d)", v.Name(), i+1, v.Parallelism)})
		}
	}
	return out
}
