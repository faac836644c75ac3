package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// MetadataVersion is the _metadata format version this build writes and
// reads.
const MetadataVersion uint32 = 1

// MetadataMagic starts every _metadata file.
const MetadataMagic = "WEIRCHK\x00"

const (
	metaHeaderSize  = 8 + 4 + 8
	metaTrailerSize = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeMetadata returns the _metadata bytes for payload (see the package
// doc for the format). payload is not retained.
func EncodeMetadata(payload []byte) []byte {
	buf := make([]byte, 0, metaHeaderSize+len(payload)+metaTrailerSize)
	buf = append(buf, MetadataMagic...)
	buf = binary.BigEndian.AppendUint32(buf, MetadataVersion)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(payload)))
	buf = append(buf, payload...)
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

// DecodeMetadata verifies data as a _metadata file and returns its payload,
// which aliases data. Checks, in order: magic, minimum size (24 bytes),
// version (ErrUnsupportedVersion
// naming both versions), declared length against the actual size, CRC-32C.
// All other failures wrap ErrCorrupt.
func DecodeMetadata(data []byte) ([]byte, error) {
	if len(data) < len(MetadataMagic) {
		return nil, fmt.Errorf("%w: truncated: %d bytes, shorter than the magic number", ErrCorrupt, len(data))
	}
	if string(data[:8]) != MetadataMagic {
		return nil, fmt.Errorf("%w: not a weir checkpoint metadata file (magic %q, want %q)", ErrCorrupt, data[:8], MetadataMagic)
	}
	// Every version is assumed to be at least as long as an empty version 1
	// file, so a short file is reported as truncated, not as a new version.
	if len(data) < metaHeaderSize+metaTrailerSize {
		return nil, fmt.Errorf("%w: truncated: %d bytes, shorter than header and checksum", ErrCorrupt, len(data))
	}
	if v := binary.BigEndian.Uint32(data[8:12]); v != MetadataVersion {
		return nil, fmt.Errorf("%w: metadata format version %d, this build reads version %d", ErrUnsupportedVersion, v, MetadataVersion)
	}
	n := binary.BigEndian.Uint64(data[12:20])
	if want := uint64(len(data) - metaHeaderSize - metaTrailerSize); n != want {
		return nil, fmt.Errorf("%w: payload length %d in header, file holds %d (truncated or extended)", ErrCorrupt, n, want)
	}
	end := metaHeaderSize + int(n)
	got := crc32.Checksum(data[:end], castagnoli)
	if want := binary.BigEndian.Uint32(data[end:]); got != want {
		return nil, fmt.Errorf("%w: checksum mismatch: stored %08x, computed %08x", ErrCorrupt, want, got)
	}
	return data[metaHeaderSize:end], nil
}

// WriteMetadata writes chk-<id>/_metadata for job, completing the
// checkpoint. The caller must have Finished every data file first. The
// write is atomic (see the package doc): on success the file is durable; on
// failure no valid _metadata is left, and a possibly visible partial object
// is deleted on a best-effort basis (ReadMetadata would reject it anyway).
func (s *Storage) WriteMetadata(ctx context.Context, job string, id int64, payload []byte) error {
	p, err := checkpointPrefix(job, id)
	if err != nil {
		return err
	}
	return s.writeMetadataKey(ctx, p+MetadataName, payload)
}

// writeMetadataKey writes a framed _metadata at key atomically.
func (s *Storage) writeMetadataKey(ctx context.Context, key string, payload []byte) error {
	w, err := s.b.NewWriter(ctx, key)
	if err != nil {
		return fmt.Errorf("write metadata %s: %w", key, err)
	}
	if _, err := w.Write(EncodeMetadata(payload)); err != nil {
		_ = w.Abort()
		return fmt.Errorf("write metadata %s: %w", key, err)
	}
	if err := w.Finish(); err != nil {
		if derr := s.b.Delete(context.WithoutCancel(ctx), key); derr != nil && !errors.Is(derr, ErrNotFound) {
			err = errors.Join(err, fmt.Errorf("clean up: %w", derr))
		}
		return fmt.Errorf("write metadata %s: %w", key, err)
	}
	return nil
}

// ReadMetadata reads and verifies chk-<id>/_metadata of job and returns the
// payload. Errors wrap ErrNotFound (no _metadata), ErrCorrupt or
// ErrUnsupportedVersion, or are I/O errors.
func (s *Storage) ReadMetadata(ctx context.Context, job string, id int64) ([]byte, error) {
	p, err := checkpointPrefix(job, id)
	if err != nil {
		return nil, err
	}
	return s.readMetadataKey(ctx, p+MetadataName)
}

func (s *Storage) readMetadataKey(ctx context.Context, key string) ([]byte, error) {
	r, err := s.b.NewReader(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read metadata %s: %w", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read metadata %s: %w", key, err)
	}
	payload, err := DecodeMetadata(data)
	if err != nil {
		return nil, fmt.Errorf("read metadata %s: %w", key, err)
	}
	return payload, nil
}
