package jobs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/sink"
	"github.com/weirstream/weir/source"
)

// WordCount is the classic first job: it counts how often every word
// occurs in a text and prints one line "word count" per distinct word.
//
// Dataflow:
//
//	source (text file, or generated text) -> FlatMap "Tokenize" (strings.Fields)
//	  -> KeyBy(word) -> Process "Count" (a map per subtask, emitted at end of input)
//	  -> sink with parallelism 1 (the --output file, or stdout)
//
// The order of the output lines is unspecified: it depends on the
// parallelism and on scheduling. Sort the output to compare runs.
type WordCount struct {
	input  string
	output string
	lines  int64

	fs *pflag.FlagSet // to tell whether --lines was given
}

var _ Job = (*WordCount)(nil)

// DefaultWordCountLines is how many lines of text wordcount generates when
// it has no --input.
const DefaultWordCountLines = 10000

// NewWordCount returns the wordcount job with default settings.
func NewWordCount() Job { return &WordCount{lines: DefaultWordCountLines} }

// Name implements Job.
func (w *WordCount) Name() string { return "wordcount" }

// Description implements Job.
func (w *WordCount) Description() string {
	return "Count the words of a text file or of generated text"
}

// LongDescription implements LongDescriber.
func (w *WordCount) LongDescription() string {
	return `Count how often every word occurs in a text and print one line "word count"
per distinct word, words being what strings.Fields splits a line into.

The text is the --input file, or --lines lines of generated text drawn from a
fixed vocabulary (the same text for any parallelism). The dataflow is
  source -> Tokenize (FlatMap) -> KeyBy(word) -> Count (Process) -> sink
with the sink at parallelism 1. The order of the output lines is unspecified:
sort them to compare runs.`
}

var _ LongDescriber = (*WordCount)(nil)

// RegisterFlags implements Job.
func (w *WordCount) RegisterFlags(fs *pflag.FlagSet) {
	w.fs = fs
	fs.StringVar(&w.input, "input", "", "text `file` to read, split among the source subtasks (default: generated text, see --lines)")
	fs.StringVar(&w.output, "output", "", "`file` to write the \"word count\" lines to, replaced if it exists (default: standard output)")
	fs.Int64Var(&w.lines, "lines", DefaultWordCountLines, "number of lines of generated text when there is no --input")
}

// Validate implements Job.
func (w *WordCount) Validate() error {
	var errs []error
	var inInfo fs.FileInfo
	if w.input != "" {
		var err error
		inInfo, err = checkReadableFile(w.input)
		if err != nil {
			errs = append(errs, fmt.Errorf("--input %s: %w", w.input, err))
		}
		if w.fs != nil && w.fs.Changed("lines") {
			errs = append(errs, errors.New("--lines applies only to generated text: drop it or drop --input"))
		}
	}
	if w.lines < 0 {
		errs = append(errs, fmt.Errorf("--lines %d: must not be negative", w.lines))
	}
	if w.output != "" {
		if err := checkWritablePath(w.output, inInfo); err != nil {
			errs = append(errs, fmt.Errorf("--output %s: %w", w.output, err))
		}
	}
	return errors.Join(errs...)
}

// checkReadableFile checks that path is a regular file we can open.
func checkReadableFile(path string) (fs.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, pathErrCause(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, pathErrCause(err)
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	return st, nil
}

// checkWritablePath checks that a file can be created at path: its
// directory exists, it is not a directory itself, and it is not the input
// (whose info is in, if any).
func checkWritablePath(path string, in fs.FileInfo) error {
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return errors.New("is a directory; give a file name")
		}
		if in != nil && os.SameFile(st, in) {
			return errors.New("is the input file; writing it would destroy the input")
		}
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, pathErrCause(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// pathErrCause drops the operation and path from a *fs.PathError, which the
// callers already name.
func pathErrCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// WordCountRecord is a word and its count, the records of the Count
// operator.
type WordCountRecord = codec.Pair[string, int64]

// Operator uids of the wordcount job: stable, so that state can be found
// again once weir has checkpoints.
const (
	wordCountSourceUID   = "wordcount-source"
	wordCountTokenizeUID = "wordcount-tokenize"
	wordCountCountUID    = "wordcount-count"
	wordCountSinkUID     = "wordcount-sink"
)

// Build implements Job.
func (w *WordCount) Build(env *weir.Environment, stdout io.Writer) error {
	var lines *weir.DataStream[string]
	if w.input != "" {
		lines = weir.FromSource(env, source.TextFile(w.input))
	} else {
		lines = weir.FromSource(env, source.Generator(w.lines, GeneratedLine))
	}
	lines.UID(wordCountSourceUID)

	words := weir.FlatMap(lines, func(line string, out weir.Collector[string]) {
		for _, word := range strings.Fields(line) {
			out.Collect(word)
		}
	}).Name("Tokenize").UID(wordCountTokenizeUID)

	counts := weir.ProcessEach(weir.KeyBy(words, func(word string) string { return word }).Stream(),
		func() weir.ProcessFunction[string, WordCountRecord] { return &wordCounter{} }).
		Name("Count").UID(wordCountCountUID).
		WithCodec(codec.PairOf(codec.String(), codec.Int64()))

	format := func(r WordCountRecord) string { return r.First + " " + strconv.FormatInt(r.Second, 10) }
	var out *weir.DataSink
	if w.output != "" {
		out = weir.SinkTo(counts, sink.TextFile(w.output, format))
	} else {
		out = weir.SinkTo(counts, sink.PrintToFunc(stdout, format))
	}
	out.UID(wordCountSinkUID).SetParallelism(1)
	return nil
}

// wordCounter counts the words of one subtask and emits the counts when its
// input ends. Each subtask has its own (weir.ProcessEach).
type wordCounter struct {
	counts map[string]int64
}

var (
	_ weir.ProcessFunction[string, WordCountRecord] = (*wordCounter)(nil)
	_ weir.EndOfInputHandler[WordCountRecord]       = (*wordCounter)(nil)
)

func (c *wordCounter) ProcessElement(_ *weir.Context[WordCountRecord], word string) error {
	if c.counts == nil {
		c.counts = make(map[string]int64)
	}
	c.counts[word]++
	return nil
}

func (c *wordCounter) EndOfInput(ctx *weir.Context[WordCountRecord]) error {
	for word, n := range c.counts {
		ctx.Emit(WordCountRecord{First: word, Second: n})
	}
	c.counts = nil
	return nil
}
