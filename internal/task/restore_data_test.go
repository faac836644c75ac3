package task

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// restoreDataJob is a Job that restores checkpoint 7 of "job" from a
// mem:// storage holding one file per given content, the handles recording
// recorded (the contents as written at checkpoint time).
func restoreDataJob(t *testing.T, recorded, stored map[string][]byte) (*Job, map[string]storage.FileHandle) {
	t.Helper()
	ctx := context.Background()
	s, err := storage.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	handles := map[string]storage.FileHandle{}
	st := metadata.Subtask{Index: 0, KeyGroupStart: 0, KeyGroupEnd: 7}
	for name, data := range recorded {
		w, err := s.CreateFile(ctx, "job", 7, name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		h, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		handles[name] = h
		if content, ok := stored[name]; ok {
			// Overwrite with other content (nil: delete), keeping the handle.
			if err := s.DeleteFile(ctx, "job", h.Path); err != nil {
				t.Fatal(err)
			}
			if content != nil {
				w, _ := s.CreateFile(ctx, "job", 7, name)
				w.Write(content)
				if _, err := w.Finish(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if st.Keyed == nil {
			st.Keyed = &h
		} else {
			st.Timers = &h
		}
	}
	cp := &metadata.Checkpoint{Version: metadata.Version, ID: 7, Operators: []metadata.Operator{
		{UID: "win", Name: "window", Parallelism: 1, MaxParallelism: 8, Subtasks: []metadata.Subtask{st}},
	}}
	restored, err := mapRestoredState(restoreGraph(8), cp)
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{ctx: ctx, restored: restored, opts: Options{Restore: cp, RestoreStorage: s, RestoreJob: "job"}}
	return j, handles
}

// Deploy's check finds files that are missing or of another size, before
// any task is built, and reports them as ErrRestoreData.
func TestCheckRestoredFiles(t *testing.T) {
	data := bytes.Repeat([]byte("state"), 100)
	j, _ := restoreDataJob(t, map[string][]byte{"a.kst": data}, nil)
	if err := j.checkRestoredFiles(); err != nil {
		t.Fatalf("intact: %v", err)
	}
	for name, stored := range map[string][]byte{"truncated": data[:100], "missing": nil} {
		t.Run(name, func(t *testing.T) {
			j, _ := restoreDataJob(t, map[string][]byte{"a.kst": data}, map[string][]byte{"a.kst": stored})
			err := j.checkRestoredFiles()
			want := "checkpoint 7: checkpoint data cannot be restored: data file mem://job/chk-7/a.kst: size 100, want 500"
			if stored == nil {
				want = "checkpoint 7: checkpoint data cannot be restored: data file mem://job/chk-7/a.kst: missing"
			}
			if !errors.Is(err, ErrRestoreData) || err == nil || err.Error() != want {
				t.Fatalf("err = %v\nwant %s (ErrRestoreData)", err, want)
			}
		})
	}
	// Other content of the same size passes this check; reading finds it.
	j, _ = restoreDataJob(t, map[string][]byte{"a.kst": data}, map[string][]byte{"a.kst": bytes.Repeat([]byte("STATE"), 100)})
	if err := j.checkRestoredFiles(); err != nil {
		t.Fatalf("same size: %v", err)
	}
}

// A restored read of a file whose checksum does not match fails with
// ErrRestoreData; a consumer that stops early (a parse error) and closes
// the file still has the damage found and recorded for Run.
func TestRestoredReadDamage(t *testing.T) {
	data := bytes.Repeat([]byte("state"), 1000)
	other := bytes.Repeat([]byte("STATE"), 1000)
	t.Run("read-to-end", func(t *testing.T) {
		j, hs := restoreDataJob(t, map[string][]byte{"a.kst": data}, map[string][]byte{"a.kst": other})
		rc, err := j.openRestored(hs["a.kst"])
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(rc)
		rc.Close()
		if !errors.Is(err, ErrRestoreData) || !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), "job/chk-7/a.kst") {
			t.Fatalf("err = %v, want ErrRestoreData naming the file", err)
		}
		if d := j.restoreDamage.Load(); d == nil || *d != err {
			t.Fatalf("recorded damage %v, want %v", d, err)
		}
	})
	t.Run("stopped-early", func(t *testing.T) {
		j, hs := restoreDataJob(t, map[string][]byte{"a.kst": data}, map[string][]byte{"a.kst": other})
		rc, err := j.openRestored(hs["a.kst"])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rc.Read(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		if j.restoreDamage.Load() != nil {
			t.Fatal("damage recorded before the end of the file")
		}
		rc.Close()
		d := j.restoreDamage.Load()
		if d == nil || !errors.Is(*d, ErrRestoreData) || !strings.Contains((*d).Error(), "job/chk-7/a.kst") {
			t.Fatalf("recorded damage %v, want ErrRestoreData naming the file", d)
		}
	})
	t.Run("intact", func(t *testing.T) {
		j, hs := restoreDataJob(t, map[string][]byte{"a.kst": data}, nil)
		rc, err := j.openRestored(hs["a.kst"])
		if err != nil {
			t.Fatal(err)
		}
		rc.Read(make([]byte, 10))
		rc.Close()
		if got, err := io.ReadAll(mustOpen(t, j, hs["a.kst"])); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
		if d := j.restoreDamage.Load(); d != nil {
			t.Fatalf("damage recorded for an intact file: %v", *d)
		}
	})
	t.Run("missing", func(t *testing.T) {
		j, hs := restoreDataJob(t, map[string][]byte{"a.kst": data}, map[string][]byte{"a.kst": nil})
		_, err := j.openRestored(hs["a.kst"])
		if !errors.Is(err, ErrRestoreData) || !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("err = %v, want ErrRestoreData and ErrNotFound", err)
		}
	})
}

func mustOpen(t *testing.T, j *Job, h storage.FileHandle) io.Reader {
	t.Helper()
	rc, err := j.openRestored(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	return rc
}
