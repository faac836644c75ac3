package changelog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/clock"
)

// Magic starts every segment file.
const Magic = "WEIRCLG\x00"

// Defaults of Config, as in Flink's state.changelog.dstl.dfs.* options.
const (
	DefaultPersistDelay               = 10 * time.Millisecond
	DefaultPersistSizeThreshold       = 10 << 20
	DefaultPreemptivePersistThreshold = 5 << 20
	DefaultUploadTimeout              = time.Second
	DefaultMaxAttempts                = 3
	DefaultMaxInFlight                = 100 << 20
)

var (
	// ErrClosed is returned by a Writer after Close.
	ErrClosed = errors.New("changelog: writer closed")
	// ErrNotContiguous: segments handed to Replay leave a gap, overlap, or
	// do not cover the requested range; or Persist was asked for records the
	// Writer has forgotten (Truncate) or not yet been given.
	ErrNotContiguous = errors.New("changelog: segments not contiguous")
	// ErrUploadTimeout is the error of an upload attempt that did not finish
	// within Config.UploadTimeout.
	ErrUploadTimeout = errors.New("changelog: upload timed out")
)

// Config tunes a Writer. Zero fields take the defaults; a negative
// PersistDelay, PersistSizeThreshold, PreemptivePersistThreshold,
// UploadTimeout or MaxInFlight disables that trigger or bound.
type Config struct {
	// PersistDelay: a batch is uploaded this long after its first record.
	PersistDelay time.Duration
	// PersistSizeThreshold: a batch is uploaded once it holds this many bytes.
	PersistSizeThreshold int64
	// PreemptivePersistThreshold: a batch is uploaded early once it holds
	// this many bytes, so a checkpoint only flushes a small tail.
	PreemptivePersistThreshold int64
	// UploadTimeout bounds one upload attempt.
	UploadTimeout time.Duration
	// MaxAttempts is the number of attempts per segment, the first included.
	MaxAttempts int
	// MaxInFlight bounds the bytes of batches being uploaded; beyond it
	// Append blocks.
	MaxInFlight int64
	// Clock drives the delay and timeout timers and the latency figures;
	// nil means clock.Real().
	Clock clock.Clock
	// OnFailure, if set, is called once, from an upload goroutine, when the
	// Writer fails (an upload failed MaxAttempts times), so that its owner
	// can fail at once rather than at its next Append or Persist.
	OnFailure func(error)
}

func (c Config) withDefaults() Config {
	if c.PersistDelay == 0 {
		c.PersistDelay = DefaultPersistDelay
	}
	if c.PersistSizeThreshold == 0 {
		c.PersistSizeThreshold = DefaultPersistSizeThreshold
	}
	if c.PreemptivePersistThreshold == 0 {
		c.PreemptivePersistThreshold = DefaultPreemptivePersistThreshold
	}
	if c.UploadTimeout == 0 {
		c.UploadTimeout = DefaultUploadTimeout
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c
}

// cutSize is the batch size that triggers an upload, or -1 for none.
func (c Config) cutSize() int64 {
	s := int64(-1)
	for _, t := range []int64{c.PersistSizeThreshold, c.PreemptivePersistThreshold} {
		if t > 0 && (s < 0 || t < s) {
			s = t
		}
	}
	return s
}

// Segment is one uploaded segment file and the inclusive range [From, To]
// of sequence numbers it holds: the checkpoint metadata's LogSegment.
type Segment = metadata.LogSegment

// Stats are a Writer's upload figures.
type Stats struct {
	Records        int64         // records appended
	Uploads        int64         // segments uploaded
	FailedAttempts int64         // upload attempts that failed or timed out
	FailedUploads  int64         // segments whose every attempt failed
	BytesUploaded  int64         // bytes of uploaded segments
	InFlightBytes  int64         // bytes of batches being uploaded now
	LatencyTotal   time.Duration // sum over uploaded segments, cut to Finish
	LatencyMax     time.Duration // largest of those
}

// Writer is one operator subtask's log. Sequence numbers start at 1 and grow
// by one per record. Its methods are safe for concurrent use.
type Writer struct {
	store       *storage.Storage
	job, prefix string
	cfg         Config
	cut         int64

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	space    *sync.Cond // signalled when inFlight drops or the writer fails/closes
	next     int64      // next sequence number
	open     *batch
	segs     []*segment // cut, in sequence order, not yet truncated
	files    int64      // segment files cut so far
	lastSize int        // size of the last batch cut, to size the next buffer
	free     [][]byte   // buffers of uploaded batches, for new batches
	inFlight int64
	err      error // sticky upload failure
	closed   bool
	stats    Stats
}

type batch struct {
	from, to int64
	buf      []byte
	stop     chan struct{} // closed when cut: ends the delay timer
}

// uploaded reports whether the segment's upload has ended.
func (s *segment) uploaded() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

type segment struct {
	from, to int64
	name     string
	size     int64
	done     chan struct{} // closed when the upload succeeded or failed
	handle   storage.FileHandle
	err      error
}

// NewWriter returns the Writer of one subtask's log. Segments go to
// <job>/shared/<prefix>-<n>.log; prefix must be unique per Writer
// incarnation (see the package doc) and consist of [A-Za-z0-9._-].
func NewWriter(store *storage.Storage, job, prefix string, cfg Config) (*Writer, error) {
	if _, err := storage.SanitizeJob(job); err != nil {
		return nil, fmt.Errorf("changelog: job %q: %w", job, err)
	}
	if name := segmentName(prefix, 1); prefix == "" || prefix[0] == '.' {
		return nil, fmt.Errorf("changelog: prefix %q: %w", prefix, storage.ErrInvalidName)
	} else if s, err := storage.SanitizeJob(name); err != nil || s != name {
		return nil, fmt.Errorf("changelog: prefix %q: %w", prefix, storage.ErrInvalidName)
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{store: store, job: job, prefix: prefix, cfg: cfg, cut: cfg.cutSize(),
		ctx: ctx, cancel: cancel, next: 1}
	w.space = sync.NewCond(&w.mu)
	return w, nil
}

func segmentName(prefix string, n int64) string {
	return prefix + "-" + strconv.FormatInt(n, 10) + ".log"
}

// Append adds rec (copied) to the log and returns its sequence number.
// While the bytes in flight exceed Config.MaxInFlight it blocks until an
// upload completes. Once an upload has failed MaxAttempts times, Append
// returns that error; after Close, ErrClosed.
func (w *Writer) Append(rec []byte) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.admitLocked(); err != nil {
		return 0, err
	}
	return w.addLocked(nil, rec), nil
}

// AppendFramed adds the records of frames, each uvarint(len) followed by
// len bytes, in order, as Append would one by one but under one lock, and
// returns the sequence number of the last. A caller appending many small
// records (the changelog backend, per state write) collects them so.
func (w *Writer) AppendFramed(frames []byte) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.admitLocked(); err != nil {
		return 0, err
	}
	for len(frames) > 0 {
		l, n := binary.Uvarint(frames)
		if n <= 0 || l > uint64(len(frames)-n) {
			return w.next - 1, errors.New("changelog: AppendFramed: malformed frames")
		}
		end := n + int(l)
		w.addLocked(frames[:end], nil)
		frames = frames[end:]
	}
	return w.next - 1, nil
}

// admitLocked waits while too much is in flight and reports whether the
// Writer still takes records.
func (w *Writer) admitLocked() error {
	for w.err == nil && !w.closed && w.cfg.MaxInFlight > 0 && w.inFlight > w.cfg.MaxInFlight {
		w.space.Wait()
	}
	return w.usableLocked()
}

// addLocked adds one record, given either framed (uvarint(len) and the
// bytes) or as rec, to the open batch, and returns its sequence number.
func (w *Writer) addLocked(framed, rec []byte) int64 {
	seq := w.next
	w.next++
	b := w.open
	if b == nil {
		b = &batch{from: seq, buf: w.bufferLocked(max(4096, w.lastSize+w.lastSize/4)), stop: make(chan struct{})}
		b.buf = append(b.buf, Magic...)
		w.open = b
		if w.cfg.PersistDelay > 0 {
			t := w.cfg.Clock.NewTimer(w.cfg.PersistDelay)
			w.wg.Add(1)
			go w.delay(b, t)
		}
	}
	b.buf = binary.AppendUvarint(b.buf, uint64(seq))
	if framed != nil {
		b.buf = append(b.buf, framed...)
	} else {
		b.buf = binary.AppendUvarint(b.buf, uint64(len(rec)))
		b.buf = append(b.buf, rec...)
	}
	b.to = seq
	w.stats.Records++
	if w.cut > 0 && int64(len(b.buf)) >= w.cut {
		w.cutLocked()
	}
	return seq
}

// maxFree is how many uploaded batch buffers a Writer keeps for reuse: at
// a steady rate a few are in flight at a time, and reusing them spares the
// task goroutine allocating (and zeroing) a buffer per batch.
const maxFree = 4

// bufferLocked returns an empty buffer of capacity at least n.
func (w *Writer) bufferLocked(n int) []byte {
	for i := len(w.free) - 1; i >= 0; i-- {
		if b := w.free[i]; cap(b) >= n {
			w.free = append(w.free[:i], w.free[i+1:]...)
			return b[:0]
		}
	}
	return make([]byte, 0, n)
}

// recycleLocked keeps buf for a later batch, replacing the smallest kept
// buffer when there are maxFree already.
func (w *Writer) recycleLocked(buf []byte) {
	if len(w.free) < maxFree {
		w.free = append(w.free, buf)
		return
	}
	small := 0
	for i, b := range w.free {
		if cap(b) < cap(w.free[small]) {
			small = i
		}
	}
	if cap(buf) > cap(w.free[small]) {
		w.free[small] = buf
	}
}

func (w *Writer) usableLocked() error {
	switch {
	case w.closed:
		return ErrClosed
	case w.err != nil:
		return w.err
	}
	return nil
}

// delay uploads b once PersistDelay has passed, unless it was cut before.
func (w *Writer) delay(b *batch, t clock.Timer) {
	defer w.wg.Done()
	select {
	case <-t.C():
		w.mu.Lock()
		if w.open == b {
			w.cutLocked()
		}
		w.mu.Unlock()
	case <-b.stop:
		t.Stop()
	}
}

// cutLocked closes the open batch and starts its upload.
func (w *Writer) cutLocked() {
	b := w.open
	w.open = nil
	w.lastSize = len(b.buf)
	close(b.stop)
	w.files++
	s := &segment{from: b.from, to: b.to, name: segmentName(w.prefix, w.files),
		size: int64(len(b.buf)), done: make(chan struct{})}
	w.segs = append(w.segs, s)
	w.inFlight += s.size
	w.wg.Add(1)
	go w.upload(s, b.buf)
}

func (w *Writer) upload(s *segment, data []byte) {
	defer w.wg.Done()
	start := w.cfg.Clock.Now()
	var (
		h         storage.FileHandle
		err       error
		abandoned bool // an attempt timed out and may still read data
	)
	for range w.cfg.MaxAttempts {
		if h, err = w.attempt(s.name, data); err == nil {
			break
		}
		abandoned = abandoned || errors.Is(err, ErrUploadTimeout)
		w.mu.Lock()
		w.stats.FailedAttempts++
		w.mu.Unlock()
		if w.ctx.Err() != nil {
			err = ErrClosed
			break
		}
	}
	lat := w.cfg.Clock.Now().Sub(start)

	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight -= s.size
	if !abandoned {
		w.recycleLocked(data)
	}
	if err == nil {
		s.handle = h
		w.stats.Uploads++
		w.stats.BytesUploaded += s.size
		w.stats.LatencyTotal += lat
		w.stats.LatencyMax = max(w.stats.LatencyMax, lat)
	} else {
		s.err = fmt.Errorf("changelog: upload of %s (records %d..%d) failed after %d attempts: %w",
			s.name, s.from, s.to, w.cfg.MaxAttempts, err)
		if errors.Is(err, ErrClosed) {
			s.err = ErrClosed
		}
		if w.err == nil && !w.closed {
			w.err = s.err
			if f := w.cfg.OnFailure; f != nil {
				go f(s.err)
			}
		}
		w.stats.FailedUploads++
	}
	close(s.done)
	w.space.Broadcast()
}

// attempt uploads data once, giving up after UploadTimeout. A timed-out
// write is cancelled and left to finish in the background.
func (w *Writer) attempt(name string, data []byte) (storage.FileHandle, error) {
	type result struct {
		h   storage.FileHandle
		err error
	}
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	res := make(chan result, 1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		h, err := w.write(ctx, name, data)
		res <- result{h, err}
	}()
	if w.cfg.UploadTimeout < 0 {
		r := <-res
		return r.h, r.err
	}
	t := w.cfg.Clock.NewTimer(w.cfg.UploadTimeout)
	defer t.Stop()
	select {
	case r := <-res:
		return r.h, r.err
	case <-t.C():
		return storage.FileHandle{}, fmt.Errorf("%w after %v", ErrUploadTimeout, w.cfg.UploadTimeout)
	}
}

func (w *Writer) write(ctx context.Context, name string, data []byte) (storage.FileHandle, error) {
	fw, err := w.store.CreateSharedFile(ctx, w.job, name)
	if err != nil {
		return storage.FileHandle{}, err
	}
	if _, err := fw.Write(data); err != nil {
		fw.Abort()
		return storage.FileHandle{}, err
	}
	return fw.Finish()
}

// Persist makes the records from..upTo durable, uploading the part of them
// still in the open batch now, and returns the segments covering [from, upTo]
// in order. The first and last segment may hold records outside the range.
// An empty range (from > upTo) yields no segments. It fails if the records
// were not appended yet or were forgotten by Truncate, if an upload failed
// (the Writer has then failed), or when ctx ends.
func (w *Writer) Persist(ctx context.Context, from, upTo int64) ([]Segment, error) {
	w.mu.Lock()
	if err := w.usableLocked(); err != nil {
		w.mu.Unlock()
		return nil, err
	}
	if from > upTo {
		w.mu.Unlock()
		return nil, nil
	}
	if from < 1 || upTo >= w.next {
		last := w.next - 1
		w.mu.Unlock()
		return nil, fmt.Errorf("changelog: persist %d..%d: %w: records 1..%d appended", from, upTo, ErrNotContiguous, last)
	}
	if w.open != nil && w.open.from <= upTo {
		w.cutLocked()
	}
	var segs []*segment
	for _, s := range w.segs {
		if s.to >= from && s.from <= upTo {
			segs = append(segs, s)
		}
	}
	w.mu.Unlock()
	if len(segs) == 0 || segs[0].from > from {
		return nil, fmt.Errorf("changelog: persist %d..%d: %w: records truncated", from, upTo, ErrNotContiguous)
	}
	out := make([]Segment, 0, len(segs))
	for _, s := range segs {
		select {
		case <-s.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if s.err != nil {
			return nil, s.err
		}
		out = append(out, Segment{File: s.handle, From: s.from, To: s.to})
	}
	return out, nil
}

// Truncate forgets, in memory, the segments that hold only records before
// `before` (typically once no checkpoint will need them) and returns their
// names. A segment still uploading is kept (and the ones after it), so that
// the caller never deletes a file the upload is about to create; a later
// Truncate returns it. It does not delete files; that is the checkpoint layer's job.
func (w *Writer) Truncate(before int64) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := 0
	var names []string
	for i < len(w.segs) && w.segs[i].to < before && w.segs[i].uploaded() {
		names = append(names, w.segs[i].name)
		i++
	}
	w.segs = append(w.segs[:0:0], w.segs[i:]...)
	return names
}

// Close stops the Writer: the open batch is discarded (Persist what must be
// durable first), uploads in progress are cancelled, and Close waits for the
// background goroutines. It returns the Writer's upload failure, if any.
// Later calls return ErrClosed from Append and Persist.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	if w.open != nil {
		close(w.open.stop)
		w.open = nil
	}
	err := w.err
	w.space.Broadcast()
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
	return err
}

// Stats returns the Writer's figures so far.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.InFlightBytes = w.inFlight
	return s
}

// LastSeq returns the sequence number of the last record appended, 0 if
// none.
func (w *Writer) LastSeq() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next - 1
}

// Names returns the names (under shared/) of the segment files cut and not
// truncated, uploaded or not: the files the Writer may have created that
// Truncate did not hand back.
func (w *Writer) Names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, len(w.segs))
	for i, s := range w.segs {
		out[i] = s.name
	}
	return out
}

// EncodeSegment returns a segment file holding recs as records
// from, from+1, ...: what a Writer would upload for them.
func EncodeSegment(recs [][]byte, from int64) []byte {
	buf := []byte(Magic)
	for i, r := range recs {
		buf = binary.AppendUvarint(buf, uint64(from+int64(i)))
		buf = binary.AppendUvarint(buf, uint64(len(r)))
		buf = append(buf, r...)
	}
	return buf
}
