package jobs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
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
//	  -> KeyBy(word) -> KeyedProcess "Count" (a count per word in keyed state,
//	     emitted by an event-time timer when the input ends)
//	  -> sink with parallelism 1 (part files under --output, or stdout)
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
with the sink at parallelism 1. The counts live in keyed state and are
emitted when the input ends, so the job checkpoints and resumes (--from).
With --output, lines go to part files in that directory, committed exactly
once (names starting with '.' are uncommitted). The order of the output
lines is unspecified: sort them to compare runs.`
}

var _ LongDescriber = (*WordCount)(nil)

// RegisterFlags implements Job.
func (w *WordCount) RegisterFlags(fs *pflag.FlagSet) {
	w.fs = fs
	fs.StringVar(&w.input, "input", "", "text `file` to read, split among the source subtasks (default: generated text, see --lines)")
	fs.StringVar(&w.output, "output", "", "`directory` to write the \"word count\" lines to, as committed part files (default: standard output)")
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
		if err := checkOutputDir(w.output, inInfo); err != nil {
			errs = append(errs, fmt.Errorf("--output %s: %w", w.output, err))
		}
	}
	return errors.Join(errs...)
}

// checkOutputDir checks that path is a directory or can be created as one
// (its parent exists), and is not the input file (whose info is in).
func checkOutputDir(path string, in fs.FileInfo) error {
	if st, err := os.Stat(path); err == nil {
		if in != nil && os.SameFile(st, in) {
			return errors.New("is the input file; writing it would destroy the input")
		}
		if !st.IsDir() {
			return errors.New("is a file; give a directory for the part files")
		}
		return nil
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

	counts := weir.KeyedProcess(weir.KeyBy(words, func(word string) string { return word }),
		func() weir.KeyedProcessFunction[string, string, WordCountRecord] { return &wordCounter{} }).
		Name("Count").UID(wordCountCountUID).
		WithCodec(codec.PairOf(codec.String(), codec.Int64()))

	format := func(r WordCountRecord) string { return r.First + " " + strconv.FormatInt(r.Second, 10) }
	var out *weir.DataSink
	if w.output != "" {
		out = weir.SinkTo[WordCountRecord](counts, sink.Files(w.output, format))
	} else {
		out = weir.SinkTo(counts, sink.PrintToFunc(stdout, format))
	}
	out.UID(wordCountSinkUID).SetParallelism(1)
	return nil
}

// wordCounter counts each word in keyed state and emits the count when the
// input ends: an event-time timer at the end of time fires once the final
// watermark arrives. State and timers are checkpointed, so a restored run
// emits the counts of the whole input.
type wordCounter struct {
	count *weir.ValueState[int64]
}

var (
	_ weir.KeyedProcessFunction[string, string, WordCountRecord] = (*wordCounter)(nil)
	_ weir.KeyedOpener[string, WordCountRecord]                  = (*wordCounter)(nil)
	_ weir.TimerHandler[string, WordCountRecord]                 = (*wordCounter)(nil)
)

func (c *wordCounter) Open(ctx *weir.KeyedContext[string, WordCountRecord]) error {
	var err error
	c.count, err = weir.GetValueState(ctx, weir.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *wordCounter) ProcessElement(ctx *weir.KeyedContext[string, WordCountRecord], _ string) error {
	n, _ := c.count.Value()
	if n == 0 {
		ctx.RegisterEventTimeTimer(math.MaxInt64)
	}
	c.count.Update(n + 1)
	return nil
}

func (c *wordCounter) OnTimer(ctx *weir.KeyedContext[string, WordCountRecord], _ weir.Timer) error {
	n, _ := c.count.Value()
	ctx.Emit(WordCountRecord{First: ctx.CurrentKey(), Second: n})
	return nil
}
