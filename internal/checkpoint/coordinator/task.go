package coordinator

import (
	"fmt"
	"sort"
)

// TaskID names one subtask that must acknowledge every checkpoint: the job
// graph vertex and the subtask index within it. It prints and parses as
// "vertex/subtask", e.g. "0/1".
type TaskID struct {
	Vertex  int
	Subtask int
}

func (t TaskID) String() string { return fmt.Sprintf("%d/%d", t.Vertex, t.Subtask) }

func (t TaskID) less(u TaskID) bool {
	if t.Vertex != u.Vertex {
		return t.Vertex < u.Vertex
	}
	return t.Subtask < u.Subtask
}

// ParseTaskID parses "vertex/subtask".
func ParseTaskID(s string) (TaskID, error) {
	var t TaskID
	var rest string
	n, _ := fmt.Sscanf(s, "%d/%d%s", &t.Vertex, &t.Subtask, &rest)
	if n != 2 || t.Vertex < 0 || t.Subtask < 0 {
		return TaskID{}, fmt.Errorf("coordinator: bad task id %q (want vertex/subtask)", s)
	}
	return t, nil
}

func sortTasks(ts []TaskID) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].less(ts[j]) })
}
