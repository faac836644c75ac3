package changelog

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// Replay reads segs in order and calls fn for every record with a sequence
// number in [from, to], in increasing order. segs must be contiguous (each
// From one past the previous To) and cover [from, to]; otherwise the error
// wraps ErrNotContiguous and no record is delivered. Every file is verified
// (size, CRC-32C, magic, record framing and sequence numbers against the
// Segment) before any of its records is passed on; failures wrap
// storage.ErrCorrupt. rec aliases the segment's read buffer: fn must not
// modify it. Replay reads every segment into a new buffer and never reuses
// it, so fn may keep rec (ReplayWith: if read returns a new buffer each
// time). An error from fn stops Replay and is returned.
// An empty range (from > to) reads nothing.
func Replay(ctx context.Context, store *storage.Storage, job string, segs []Segment, from, to int64,
	fn func(seq int64, rec []byte) error) error {
	return ReplayWith(ctx, func(ctx context.Context, h storage.FileHandle) ([]byte, error) {
		return store.ReadFile(ctx, job, h)
	}, segs, from, to, fn)
}

// ReplayWith is Replay reading the segment files with read, which must
// verify them against their handles as storage.ReadFile does.
func ReplayWith(ctx context.Context, read func(context.Context, storage.FileHandle) ([]byte, error), segs []Segment, from, to int64,
	fn func(seq int64, rec []byte) error) error {
	if from > to {
		return nil
	}
	if len(segs) == 0 {
		return fmt.Errorf("changelog: replay %d..%d: %w: no segments", from, to, ErrNotContiguous)
	}
	for i, s := range segs {
		if s.From < 1 || s.From > s.To {
			return fmt.Errorf("changelog: segment %s: %w: bad range %d..%d", s.File.Path, ErrNotContiguous, s.From, s.To)
		}
		if i > 0 && s.From != segs[i-1].To+1 {
			kind := "gap"
			if s.From <= segs[i-1].To {
				kind = "overlap"
			}
			return fmt.Errorf("changelog: %w: %s between %s (%d..%d) and %s (%d..%d)", ErrNotContiguous, kind,
				segs[i-1].File.Path, segs[i-1].From, segs[i-1].To, s.File.Path, s.From, s.To)
		}
	}
	if first, last := segs[0], segs[len(segs)-1]; first.From > from || last.To < to {
		return fmt.Errorf("changelog: replay %d..%d: %w: segments hold %d..%d", from, to, ErrNotContiguous, first.From, last.To)
	}
	for _, s := range segs {
		if s.To < from || s.From > to {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := read(ctx, s.File)
		if err != nil {
			return fmt.Errorf("changelog: read segment %s: %w", s.File.Path, err)
		}
		if err := scan(data, s, from, to, fn); err != nil {
			return err
		}
	}
	return nil
}

// scan checks all of data against s and then delivers the records in range.
func scan(data []byte, s Segment, from, to int64, fn func(int64, []byte) error) error {
	type span struct{ off, end int }
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("changelog: segment %s: %w: %s", s.File.Path, storage.ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if len(data) < len(Magic) || string(data[:len(Magic)]) != Magic {
		return corrupt("bad magic")
	}
	// A record takes at least 2 bytes: a corrupt range cannot make this
	// allocate more than the file.
	recs := make([]span, 0, min(s.To-s.From+1, int64(len(data)/2)))
	p := data[len(Magic):]
	off := len(Magic)
	want := s.From
	for len(p) > 0 {
		seq, n := binary.Uvarint(p)
		if n <= 0 {
			return corrupt("bad sequence number at offset %d", off)
		}
		p, off = p[n:], off+n
		l, n := binary.Uvarint(p)
		if n <= 0 || l > uint64(len(p)-n) {
			return corrupt("bad record length at offset %d", off)
		}
		p, off = p[n:], off+n
		if int64(seq) != want || want > s.To {
			return corrupt("record %d where %d expected (segment holds %d..%d)", seq, want, s.From, s.To)
		}
		recs = append(recs, span{off, off + int(l)})
		p, off = p[l:], off+int(l)
		want++
	}
	if want != s.To+1 {
		return corrupt("ends at record %d, segment holds %d..%d", want-1, s.From, s.To)
	}
	for i, r := range recs {
		seq := s.From + int64(i)
		if seq < from || seq > to {
			continue
		}
		if err := fn(seq, data[r.off:r.end:r.end]); err != nil {
			return err
		}
	}
	return nil
}
