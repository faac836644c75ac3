// Package jobs holds weir's built-in jobs, the ones `weir run <job>` starts.
//
// A job is a small program over the public weir API: it owns a few
// settings, exposes them as command-line flags, checks them, and declares a
// dataflow in an Environment. The command line drives every job through the
// same sequence, once per invocation and from one goroutine:
//
//  1. Registry.New returns a fresh Job, so no two runs share settings;
//  2. RegisterFlags adds the job's flags to the command's flag set;
//  3. the command line is parsed into them;
//  4. Validate checks the settings and reports every problem at once;
//  5. if Validate and the configuration are fine, Build declares the
//     dataflow and the caller executes the Environment.
//
// Adding a job means writing a type that implements Job and adding its
// constructor to Builtin.
package jobs

import (
	"fmt"
	"io"
	"regexp"
	"slices"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
)

// Job is one built-in job. A Job value holds the settings of one run; its
// methods are called in the order the package documentation lists, from one
// goroutine.
type Job interface {
	// Name is the job's name on the command line (weir run NAME) and its
	// default job name: lowercase letters, digits and dashes.
	Name() string
	// Description says what the job does in one line, without a final
	// period, for listings and help.
	Description() string
	// RegisterFlags adds the job's flags to fs, bound to the job's settings.
	// The flag names must not clash with the flags common to every job
	// (parallelism, set, config, log-format, log-level, help).
	RegisterFlags(fs *pflag.FlagSet)
	// Validate checks the settings after the flags were parsed. It reports
	// every problem at once (errors.Join), each naming the flag concerned,
	// and returns nil if the job can be built. It may look at the file
	// system (does the input exist?) but must not change it.
	Validate() error
	// Build declares the job's dataflow in env. Whatever the job prints for
	// the user goes to stdout, never to os.Stdout directly. An error means
	// the job cannot run as configured; failures while the job runs are
	// reported by env.Execute instead.
	Build(env *weir.Environment, stdout io.Writer) error
}

// LongDescriber is implemented by jobs that have more to say than their
// Description: the dataflow, the output format. `weir run <job> --help`
// shows the text.
type LongDescriber interface {
	LongDescription() string
}

// Defaulter is implemented by jobs that need configuration of their own,
// such as a checkpoint interval: Defaults returns configuration keys and
// values that apply unless the configuration (--config, --set) sets the
// key itself.
type Defaulter interface {
	Defaults() map[string]string
}

// Registry is a set of jobs by name. It is not safe for concurrent
// modification; reading it from several goroutines is fine.
type Registry struct {
	factories map[string]func() Job
}

// Builtin returns a new registry holding weir's built-in jobs. Callers may
// add jobs to the result without affecting other registries.
func Builtin() *Registry {
	r := &Registry{}
	r.Add(NewWordCount)
	r.Add(NewCounter)
	r.Add(NewTroubled)
	r.Add(NewKafkaWordCount)
	return r
}

var validName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// Add registers the job that newJob creates; newJob is called once now to
// learn the name and again for every run. It panics if the name is invalid
// or already registered: the registry is assembled by code, not user input.
func (r *Registry) Add(newJob func() Job) {
	name := newJob().Name()
	if !validName.MatchString(name) {
		panic(fmt.Sprintf("jobs: invalid job name %q", name))
	}
	if _, dup := r.factories[name]; dup {
		panic(fmt.Sprintf("jobs: job %q registered twice", name))
	}
	if r.factories == nil {
		r.factories = map[string]func() Job{}
	}
	r.factories[name] = newJob
}

// Names returns the names of the registered jobs, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// New returns a fresh instance of the job called name, or false if there is
// no such job.
func (r *Registry) New(name string) (Job, bool) {
	f, ok := r.factories[name]
	if !ok {
		return nil, false
	}
	return f(), true
}
