package nexmark

import (
	"bytes"
	"errors"
	"testing"

	"github.com/weirstream/weir"
)

// A writer of a later run (a restart) is refused: the rows of the earlier
// run are in memory only, so the output would be wrong.
func TestJSONSinkRefusesRestart(t *testing.T) {
	var out bytes.Buffer
	s := &jsonSink[int64]{o: Output{JSON: &out}}
	if _, err := s.CreateWriter(weir.SinkContext{Subtask: 0, Parallelism: 2, RunID: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateWriter(weir.SinkContext{Subtask: 1, Parallelism: 2, RunID: "b"}); !errors.Is(err, ErrOutputRestarted) {
		t.Fatalf("CreateWriter of run b: %v, want ErrOutputRestarted", err)
	}
}

// The output is written once, when the last subtask's input ends, and a
// second Flush without rows changes nothing.
func TestJSONSinkWritesOnceWhenAllEnded(t *testing.T) {
	var out bytes.Buffer
	s := &jsonSink[int64]{o: Output{JSON: &out}}
	w0, _ := s.CreateWriter(weir.SinkContext{Subtask: 0, Parallelism: 2, RunID: "a"})
	w1, _ := s.CreateWriter(weir.SinkContext{Subtask: 1, Parallelism: 2, RunID: "a"})
	w0.Write(3)
	w1.Write(1)
	w1.Write(2)
	if err := w0.Flush(); err != nil || out.Len() != 0 {
		t.Fatalf("after the first end: %v, %q", err, out.String())
	}
	if err := w1.Flush(); err != nil || out.String() != "1\n2\n3\n" {
		t.Fatalf("after the last end: %v, %q", err, out.String())
	}
	if err := w1.Flush(); err != nil || out.String() != "1\n2\n3\n" {
		t.Fatalf("second flush: %v, %q", err, out.String())
	}
	w0.Close()
	w1.Close()
}
