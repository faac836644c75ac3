package nexmark_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/nexmark"
	"github.com/weirstream/weir/source"
)

// versionRow is a fake updating result: rows with one Key replace each
// other, so the result is the last Seq per key.
type versionRow struct {
	Key int64 `json:"key"`
	Seq int64 `json:"seq"`
}

func (r versionRow) RowKey() string { return strconv.FormatInt(r.Key, 10) }

var _ nexmark.Updating = versionRow{}

// appendRow is a fake append-only result.
type appendRow struct {
	N    int64 `json:"n"`
	Name string
}

// emitJSON runs rows 0..n-1 of row at parallelism p through Emit with
// Output.JSON set and returns the output and the rows counted.
func emitJSON[T any](t *testing.T, p int, n int64, row func(int64) T) (string, int64) {
	t.Helper()
	env := weir.NewEnvironment(weir.Options{Parallelism: p, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var out bytes.Buffer
	var rows atomic.Int64
	nexmark.Emit(weir.FromSource(env, source.Generator(n, row)), nexmark.Output{Rows: &rows, JSON: &out})
	if err := env.Execute(context.Background(), "emit-json"); err != nil {
		t.Fatal(err)
	}
	return out.String(), rows.Load()
}

// Updating rows: only the last row per RowKey reaches the output, written
// once although two subtasks end; every update is still counted.
func TestEmitJSONUpdatingFinalRowPerKey(t *testing.T) {
	// Keys are i/10: each key's ten rows lie in one subtask's range
	// (0-499, 500-999), in order.
	got, rows := emitJSON(t, 2, 1000, func(i int64) versionRow { return versionRow{Key: i / 10, Seq: i} })
	if rows != 1000 {
		t.Errorf("counted %d rows, want 1000", rows)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 100 {
		t.Fatalf("%d lines, want one per key (100):\n%s", len(lines), got)
	}
	if !slices.IsSorted(lines) {
		t.Errorf("lines not sorted:\n%s", got)
	}
	seen := map[int64]bool{}
	for _, l := range lines {
		var r versionRow
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if r.Seq != r.Key*10+9 || seen[r.Key] {
			t.Errorf("line %q: want the key's last row, once", l)
		}
		seen[r.Key] = true
	}
}

// Append-only rows: every row, with the json tags' names (field names
// where there is none), sorted, so that the bytes do not depend on the
// parallelism.
func TestEmitJSONAppendSortedAndDeterministic(t *testing.T) {
	row := func(i int64) appendRow { return appendRow{N: i % 37, Name: "r" + strconv.FormatInt(i, 10)} }
	one, rows := emitJSON(t, 1, 500, row)
	if rows != 500 || strings.Count(one, "\n") != 500 {
		t.Fatalf("%d rows counted, %d lines, want 500", rows, strings.Count(one, "\n"))
	}
	if !strings.HasPrefix(one, `{"n":0,"Name":"r0"}`+"\n") {
		t.Errorf("first line: %q", one[:strings.Index(one, "\n")])
	}
	if two, _ := emitJSON(t, 2, 500, row); two != one {
		t.Errorf("parallelism 2 wrote other bytes than parallelism 1")
	}
}
