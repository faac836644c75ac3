package stateread

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/state"
)

// Native keyed state (incremental checkpoints of the pebble backend): the
// database files and the state registry. The reader downloads the files
// into a temporary directory, opens them as a pebble backend
// (state.OpenPebbleFromNative), and has it write the canonical stream
// (state.TakeSnapshot), which readStream parses.
//
// A list state in native form is one stored value per (key, namespace),
// the concatenation of its elements; only the elements' codec knows where
// one ends, so the canonical snapshot needs the list registered with a
// codec. The reader registers it with a codec that measures elements with
// the codec the schema names (looked up in the codec registry); when the
// schema or the registry does not know it, the whole stored value is one
// element (and, with TTL, holds the later elements' timestamps too).

// nativeRegistry is the part of the pebble backend's registry the reader
// needs (state.encodeRegistry writes it).
type nativeRegistry struct {
	KeyGroupStart int `json:"keyGroupStart"`
	KeyGroupEnd   int `json:"keyGroupEnd"`
	States        []struct {
		Name       string `json:"name"`
		Kind       string `json:"kind"`
		TTL        bool   `json:"ttl"`
		ListFormat string `json:"listFormat"`
	} `json:"states"`
}

// rawElem is a list element as its encoding.
type rawElem []byte

// rawElemCodec measures list elements with d, or takes all the bytes for
// nil d (or when d fails).
type rawElemCodec struct{ d codec.Decoder }

func (rawElemCodec) Append(dst []byte, v rawElem) []byte { return append(dst, v...) }

func (c rawElemCodec) Decode(src []byte) (rawElem, int, error) {
	if c.d != nil {
		if _, n, err := c.d.DecodeAny(src); err == nil && n > 0 && n <= len(src) {
			return nil, n, nil
		}
	}
	return nil, len(src), nil
}

// nativeStream writes the canonical stream of a subtask's native state to
// w. Files are read from the snapshot through open (which names the file
// in its errors); tmp is a fresh directory the caller removes.
func nativeStream(ctx context.Context, ns *metadata.NativeState, maxParallelism int, schema map[string]metadata.StateSchema,
	open func(h metadataFile) (io.ReadCloser, error), tmp string, w io.Writer) error {
	var reg nativeRegistry
	if err := json.Unmarshal(ns.Registry, &reg); err != nil {
		return fmt.Errorf("native state registry: %w", err)
	}
	dir := filepath.Join(tmp, "db")
	for _, f := range ns.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		clean := path.Clean(f.Name)
		if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("native state: file name %q leaves the database directory", f.Name)
		}
		if err := download(open, f, filepath.Join(dir, filepath.FromSlash(clean))); err != nil {
			return err
		}
	}
	opts := state.Options{KeyGroupStart: reg.KeyGroupStart, KeyGroupEnd: reg.KeyGroupEnd, MaxParallelism: maxParallelism,
		Dir: dir, Clock: func() time.Time { return time.Unix(0, 0) }}
	pb, err := state.OpenPebbleFromNative(opts, ns.Registry)
	if err != nil {
		return fmt.Errorf("open native state: %w", err)
	}
	defer pb.Close()
	for _, st := range reg.States {
		if st.Kind != "list" || st.ListFormat != "native" {
			continue
		}
		var d codec.Decoder
		if sc, ok := schema[st.Name]; ok {
			d, _ = codec.Lookup(sc.Value.Codec)
		}
		var ttl state.TTLConfig
		if st.TTL {
			ttl = state.TTLConfig{TTL: time.Hour, DisableBackgroundCleanup: true}
		}
		if _, err := state.NewList(pb, state.ListDescriptor[rawElem]{Name: st.Name, Codec: rawElemCodec{d}, TTL: ttl}); err != nil {
			return fmt.Errorf("native state: list %q: %w", st.Name, err)
		}
	}
	snap, err := state.TakeSnapshot(pb)
	if err != nil {
		return fmt.Errorf("native state: %w", err)
	}
	defer snap.Release()
	if _, err := snap.WriteStream(w); err != nil {
		return fmt.Errorf("native state: %w", err)
	}
	return nil
}

// metadataFile is a native database file of the snapshot.
type metadataFile = metadata.NativeFile

func download(open func(metadataFile) (io.ReadCloser, error), f metadataFile, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	src, err := open(f)
	if err != nil {
		return err
	}
	defer src.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", f.Handle.Path, err)
	}
	return out.Close()
}
