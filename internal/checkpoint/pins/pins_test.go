package pins

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// open returns an empty storage of each kind tests use.
func open(t *testing.T) map[string]*storage.Storage {
	t.Helper()
	out := map[string]*storage.Storage{}
	for name, loc := range map[string]string{"mem": "mem://", "dir": t.TempDir()} {
		s, err := storage.Open(context.Background(), loc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[name] = s
	}
	return out
}

func TestWriteRead(t *testing.T) {
	for name, s := range open(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if _, ok, err := Read(ctx, s, "orders"); ok || err != nil {
				t.Fatalf("no record: ok %v, %v", ok, err)
			}
			at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
			in := Restore{Root: "/data/ck", Path: "/src/chk-3/", Mode: ModeNoClaim, JobID: "abc", Time: at}
			if err := Write(ctx, s, "my orders", in); err != nil {
				t.Fatal(err)
			}
			got, ok, err := Read(ctx, s, "my_orders")
			if err != nil || !ok {
				t.Fatalf("read: ok %v, %v", ok, err)
			}
			want := Restore{Root: "/data/ck", Path: "src/chk-3", Mode: ModeNoClaim, Job: "my_orders", JobID: "abc", Time: at.UTC()}
			if got != want {
				t.Fatalf("read %+v, want %+v", got, want)
			}
			if !got.Holds() {
				t.Error("an unreleased NO_CLAIM restore does not hold its snapshot")
			}
			data, err := s.ReadJobFile(ctx, "my_orders", FileName)
			if err != nil || !strings.HasPrefix(string(data), `{"version":1,"root":"/data/ck","path":"src/chk-3","mode":"NO_CLAIM","job":"my_orders"`) {
				t.Errorf("file %s: %v", data, err)
			}

			// A zero time becomes now.
			before := time.Now()
			if err := Write(ctx, s, "orders", Restore{Path: "savepoint-abc-1", Mode: ModeClaim}); err != nil {
				t.Fatal(err)
			}
			got, _, err = Read(ctx, s, "orders")
			if err != nil || got.Time.Before(before.Add(-time.Second)) || got.Time.After(time.Now()) || got.Job != "orders" {
				t.Errorf("defaults: %+v, %v", got, err)
			}
			if !got.Holds() {
				t.Error("an unreleased CLAIM restore does not hold its snapshot")
			}
			got.Released, got.ReleasedBy = true, 3
			if got.Holds() {
				t.Error("a released CLAIM restore holds its snapshot")
			}

			for _, bad := range []Restore{
				{Path: "a/chk-1", Mode: "claim"},
				{Path: "", Mode: ModeClaim},
				{Path: ".", Mode: ModeClaim},
				{Path: "a/chk-1", Mode: ModeClaim, Job: "other"},
				{Path: "a/chk-1", Mode: ModeClaim, Released: true},
				{Path: "a/chk-1", Mode: ModeClaim, ReleasedBy: 3},
			} {
				if err := Write(ctx, s, "orders", bad); !errors.Is(err, ErrInvalid) {
					t.Errorf("Write(%+v) = %v, want ErrInvalid", bad, err)
				}
			}
		})
	}
}

func TestReadInvalid(t *testing.T) {
	s := open(t)["mem"]
	ctx := context.Background()
	for _, data := range []string{
		"garbage",
		`{"version":2,"root":"","path":"a/chk-1","mode":"CLAIM","job":"j"}`,
		`{"version":1,"root":"","path":"a/chk-1","mode":"SOMETIMES","job":"j"}`,
		`{"root":"","path":"a/chk-1","mode":"CLAIM","job":"j"}`,
	} {
		if err := s.WriteJobFile(ctx, "j", FileName, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := Read(ctx, s, "j"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "j/_restored") {
			t.Errorf("%s: %v, want ErrInvalid naming j/_restored", data, err)
		}
		if _, err := Holders(ctx, s, "", "a/chk-1"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Holders with %s: %v, want ErrInvalid", data, err)
		}
	}
}

func TestHoldersAndRelease(t *testing.T) {
	for name, s := range open(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			const root, snap = "/data/ck", "orders/chk-3"
			for job, r := range map[string]Restore{
				"a": {Root: root, Path: snap, Mode: ModeNoClaim},                                // holds; no checkpoint yet
				"b": {Root: root, Path: snap, Mode: ModeNoClaim, Released: true, ReleasedBy: 1}, // released
				"c": {Root: root, Path: snap, Mode: ModeClaim},                                  // owns it
				"d": {Root: root, Path: "orders/chk-4", Mode: ModeNoClaim},                      // another snapshot
				"e": {Root: "/elsewhere", Path: snap, Mode: ModeNoClaim},                        // another root
				"f": {Root: root, Path: snap, Mode: ModeNoClaim},                                // holds; has checkpoints
			} {
				if err := Write(ctx, s, job, r); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.WriteMetadata(ctx, "f", 1, []byte("m")); err != nil {
				t.Fatal(err)
			}
			jobsOf := func(rs []Restore) string {
				var js []string
				for _, r := range rs {
					js = append(js, r.Job)
				}
				return strings.Join(js, ",")
			}
			hs, err := Holders(ctx, s, root, snap)
			if err != nil || jobsOf(hs) != "a,f" {
				t.Fatalf("Holders = %s, %v; want a,f", jobsOf(hs), err)
			}
			if hs, err := Holders(ctx, s, root, "/"+snap+"/"); err != nil || jobsOf(hs) != "a,f" {
				t.Fatalf("Holders of an unclean path = %s, %v; want a,f", jobsOf(hs), err)
			}
			rs, err := Restores(ctx, s, root, snap)
			if err != nil || jobsOf(rs) != "a,b,c,f" {
				t.Fatalf("Restores = %s, %v; want a,b,c,f", jobsOf(rs), err)
			}

			if err := Release(ctx, s, "a", 7); err != nil {
				t.Fatal(err)
			}
			if err := Release(ctx, s, "a", 9); err != nil { // already released: kept as is
				t.Fatal(err)
			}
			if err := Release(ctx, s, "nosuch", 9); err != nil {
				t.Fatalf("release without a record: %v", err)
			}
			r, _, err := Read(ctx, s, "a")
			if err != nil || !r.Released || r.ReleasedBy != 7 || r.Holds() {
				t.Fatalf("released record %+v, %v", r, err)
			}
			if !strings.Contains(r.String(), "job a restored from it in NO_CLAIM mode at ") || !strings.HasSuffix(r.String(), ", released by its checkpoint 7") {
				t.Errorf("String() = %q", r.String())
			}
			if hs, err := Holders(ctx, s, root, snap); err != nil || jobsOf(hs) != "f" {
				t.Fatalf("Holders after release = %s, %v; want f", jobsOf(hs), err)
			}
		})
	}
}
