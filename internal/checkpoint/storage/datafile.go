package storage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// FileHandle identifies a Finished data file and how to verify it. It is
// plain data, meant to be serialized into the checkpoint metadata payload.
type FileHandle struct {
	// Path relative to the job directory, e.g. "chk-7/op-3-0.sst" or
	// "shared/0001.sst".
	Path string
	// Size in bytes.
	Size int64
	// CRC32C is the CRC-32C (Castagnoli) of the whole content.
	CRC32C uint32
}

// FileWriter writes one data file. It belongs to one goroutine. Call Finish
// or Abort exactly once; Abort after Finish is a no-op.
type FileWriter interface {
	// Write appends p; the caller keeps ownership of p.
	Write(p []byte) (int, error)
	// Finish makes the file durable and visible and returns its handle.
	Finish() (FileHandle, error)
	// Abort discards the file.
	Abort() error
}

// CreateFile starts data file <job>/chk-<id>/<name> for the asynchronous
// snapshot phase. name is one segment of [A-Za-z0-9._-], not starting or
// ending with '.', not "_metadata" and not ending in ".tmp".
func (s *Storage) CreateFile(ctx context.Context, job string, id int64, name string) (FileWriter, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if id < 0 {
		return nil, fmt.Errorf("checkpoint id %d: %w: negative", id, ErrInvalidName)
	}
	return s.create(ctx, job, CheckpointDir(id)+"/"+name)
}

// CreateSharedFile starts data file <job>/shared/<name>, for files that
// several checkpoints reference. Name rules as for CreateFile.
func (s *Storage) CreateSharedFile(ctx context.Context, job string, name string) (FileWriter, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	return s.create(ctx, job, SharedDir+"/"+name)
}

func (s *Storage) create(ctx context.Context, job, rel string) (FileWriter, error) {
	jp, err := jobPrefix(job)
	if err != nil {
		return nil, err
	}
	w, err := s.b.NewWriter(ctx, jp+rel)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", jp+rel, err)
	}
	return &fileWriter{w: w, rel: rel, key: jp + rel, crc: crc32.New(castagnoli)}, nil
}

var (
	_ FileWriter    = (*fileWriter)(nil)
	_ io.ReadCloser = (*verifyingReader)(nil)
)

type fileWriter struct {
	w        ObjectWriter
	rel, key string
	crc      hash.Hash32
	n        int64
}

func (f *fileWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.crc.Write(p[:n])
	f.n += int64(n)
	if err != nil {
		return n, fmt.Errorf("write %s: %w", f.key, err)
	}
	return n, nil
}

func (f *fileWriter) Finish() (FileHandle, error) {
	if err := f.w.Finish(); err != nil {
		return FileHandle{}, fmt.Errorf("finish %s: %w", f.key, err)
	}
	return FileHandle{Path: f.rel, Size: f.n, CRC32C: f.crc.Sum32()}, nil
}

func (f *fileWriter) Abort() error { return f.w.Abort() }

// OpenFile opens the data file h of job for reading. The content is
// verified as it streams: if the size or CRC-32C differ from h, Read returns
// an error wrapping ErrCorrupt instead of io.EOF, so data is trustworthy
// only once Read has returned io.EOF. The caller must Close the reader.
func (s *Storage) OpenFile(ctx context.Context, job string, h FileHandle) (io.ReadCloser, error) {
	jp, err := jobPrefix(job)
	if err != nil {
		return nil, err
	}
	if err := validRelPath(h.Path); err != nil {
		return nil, err
	}
	key := jp + h.Path
	r, err := s.b.NewReader(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, err)
	}
	return &verifyingReader{r: r, h: h, key: key, crc: crc32.New(castagnoli)}, nil
}

// ReadFile reads and verifies the whole data file h of job.
func (s *Storage) ReadFile(ctx context.Context, job string, h FileHandle) ([]byte, error) {
	r, err := s.OpenFile(ctx, job, h)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return ReadAllSized(r, h.Size)
}

// ReadAllSized is io.ReadAll for a reader of about size bytes (a file's
// recorded size): it reads into one buffer of that size instead of growing
// one, up to 64 MiB up front so that a corrupt size cannot make it allocate
// without bound.
func ReadAllSized(r io.Reader, size int64) ([]byte, error) {
	buf := make([]byte, 0, min(max(size, 0), 64<<20)+1) // +1: room to see EOF
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

type verifyingReader struct {
	r   io.ReadCloser
	h   FileHandle
	key string
	crc hash.Hash32
	n   int64
	err error // sticky verification error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.crc.Write(p[:n])
	v.n += int64(n)
	if v.n > v.h.Size {
		v.err = fmt.Errorf("read %s: %w: longer than the recorded %d bytes", v.key, ErrCorrupt, v.h.Size)
		return 0, v.err
	}
	if errors.Is(err, io.EOF) {
		switch {
		case v.n != v.h.Size:
			v.err = fmt.Errorf("read %s: %w: size %d, recorded %d", v.key, ErrCorrupt, v.n, v.h.Size)
		case v.crc.Sum32() != v.h.CRC32C:
			v.err = fmt.Errorf("read %s: %w: checksum %08x, recorded %08x", v.key, ErrCorrupt, v.crc.Sum32(), v.h.CRC32C)
		}
		if v.err != nil {
			return 0, v.err
		}
		return n, io.EOF
	}
	if err != nil {
		return n, fmt.Errorf("read %s: %w", v.key, err)
	}
	return n, nil
}

func (v *verifyingReader) Close() error { return v.r.Close() }

// WriteAll fills the file fw was created for with fill, through a 256 KiB
// buffer, and finishes it; on any error the file is aborted.
func WriteAll(fw FileWriter, fill func(io.Writer) error) (FileHandle, error) {
	bw := bufio.NewWriterSize(fw, 256<<10)
	if err := fill(bw); err != nil {
		_ = fw.Abort()
		return FileHandle{}, err
	}
	if err := bw.Flush(); err != nil {
		_ = fw.Abort()
		return FileHandle{}, err
	}
	return fw.Finish()
}
