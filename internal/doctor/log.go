package doctor

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// logRecord is one line of a weir log (log/slog's text or JSON format).
type logRecord struct {
	time  time.Time
	msg   string
	attrs map[string]string
	// config is the "config" attribute of a JSON record, an object.
	config map[string]string
}

var lateRE = regexp.MustCompile(`^Received late message for now expired checkpoint attempt (\d+) from task (\d+)/(\d+) of job `)

// readLog adds what the job's log says to in: failed checkpoints, late
// acknowledgements of expired ones, failovers for too many failed
// checkpoints and the configuration. Records of other jobs (their "job"
// attribute is neither job nor sanitizes to jobDir) are skipped.
func readLog(file, job, jobDir string, in *Input) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("%w: --log: %w", ErrLog, err)
	}
	defer f.Close()
	byID := map[int64]*Failure{}
	var failovers []int64 // the checkpoints whose failure failed the job over
	late := map[int64][]SubtaskRef{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	lines, parsed := 0, 0
	for sc.Scan() {
		lines++
		r, ok := parseLogLine(sc.Text())
		if !ok {
			continue
		}
		parsed++
		if j, ok := r.attrs["job"]; ok && j != job {
			if sj, err := storage.SanitizeJob(j); err != nil || sj != jobDir {
				continue
			}
		}
		id, _ := strconv.ParseInt(r.attrs["checkpoint"], 10, 64)
		add := func(reason string) *Failure {
			if id == 0 || byID[id] != nil {
				return byID[id]
			}
			x := &Failure{ID: id, Time: r.time, Reason: reason, Message: r.msg, Cause: r.attrs["cause"]}
			byID[id] = x
			return x
		}
		switch {
		case r.msg == "running job":
			in.Config = configFromLog(r)
		case strings.HasPrefix(r.msg, tolerableFailureMessage):
			failovers = append(failovers, id)
		case expiredRE.MatchString(r.msg):
			if x := add(ReasonExpired); x != nil && r.attrs["pending"] != "" {
				// Subtasks that had not acknowledged, "1/0 1/1", if the
				// line carries them.
				x.Pending, x.PendingKnown = parseRefs(r.attrs["pending"]), true
			}
		case declinedRE.MatchString(r.msg):
			m := declinedRE.FindStringSubmatch(r.msg)
			reason := r.attrs["reason"]
			if reason == "" {
				reason = declineReason(r.attrs["cause"])
			}
			if x := add(reason); x != nil {
				v, _ := strconv.Atoi(m[2])
				i, _ := strconv.Atoi(m[3])
				x.Task = &SubtaskRef{v, i}
			}
		case subsumedRE.MatchString(r.msg):
			add(ReasonSubsumed)
		case ioErrorRE.MatchString(r.msg):
			add(ReasonIOError)
		case lateRE.MatchString(r.msg):
			m := lateRE.FindStringSubmatch(r.msg)
			cid, _ := strconv.ParseInt(m[1], 10, 64)
			v, _ := strconv.Atoi(m[2])
			i, _ := strconv.Atoi(m[3])
			if ref := (SubtaskRef{v, i}); !slices.Contains(late[cid], ref) {
				late[cid] = append(late[cid], ref)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: --log %s: %w", ErrLog, file, err)
	}
	if lines > 0 && parsed == 0 {
		return fmt.Errorf("%w: --log %s: not a weir log: no line is in log/slog's text or JSON format", ErrLog, file)
	}
	for _, id := range failovers {
		// A failure of the job's own stopping does not count.
		if x := byID[id]; x == nil || !stopping(*x) {
			in.JobFailovers++
		}
	}
	for id, x := range byID {
		if x.Reason == ReasonExpired && !x.PendingKnown {
			x.Pending = late[id]
		}
		in.Failures = append(in.Failures, *x)
	}
	slices.SortFunc(in.Failures, func(a, b Failure) int { return cmp.Compare(a.ID, b.ID) })
	return nil
}

// parseRefs parses subtask references "v/i", separated by spaces or
// commas.
func parseRefs(s string) []SubtaskRef {
	var out []SubtaskRef
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' }) {
		a, b, ok := strings.Cut(w, "/")
		v, err1 := strconv.Atoi(a)
		i, err2 := strconv.Atoi(b)
		if ok && err1 == nil && err2 == nil {
			out = append(out, SubtaskRef{v, i})
		}
	}
	return out
}

// configFromLog reads the configuration from the "running job" record,
// whose config attribute holds the keys set explicitly; the others have
// their defaults.
func configFromLog(r logRecord) Config {
	kv := r.config
	if kv == nil {
		kv = parseGoMap(r.attrs["config"])
	}
	cfg := config.New()
	for k, v := range kv {
		_ = cfg.Set(k, v) // a value this build does not know keeps its default
	}
	return Config{Known: true,
		Interval:          cfg.Duration("execution.checkpointing.interval"),
		Timeout:           cfg.Duration("execution.checkpointing.timeout"),
		TolerableFailures: int(cfg.Int("execution.checkpointing.tolerable-failed-checkpoints")),
		Unaligned:         cfg.Bool("execution.checkpointing.unaligned.enabled"),
		AlignedTimeout:    cfg.Duration("execution.checkpointing.aligned-checkpoint-timeout"),
		Backend:           cfg.String("state.backend.type"),
		Incremental:       cfg.Bool("execution.checkpointing.incremental"),
		Changelog:         cfg.Bool("state.changelog.enabled"),
		BufferDebloat:     cfg.Bool("taskmanager.network.memory.buffer-debloat.enabled"),
	}
}

// parseGoMap parses a map[string]string as fmt prints it ("map[a:1 b:2
// s]"): an entry starts with a known configuration key and a colon, any
// other word continues the value before it.
func parseGoMap(s string) map[string]string {
	s, ok := strings.CutPrefix(s, "map[")
	if !ok {
		return nil
	}
	s = strings.TrimSuffix(s, "]")
	out := map[string]string{}
	key := ""
	for _, w := range strings.Split(s, " ") {
		if k, v, ok := strings.Cut(w, ":"); ok {
			if _, known := config.Lookup(k); known {
				key = k
				out[key] = v
				continue
			}
		}
		if key != "" {
			out[key] += " " + w
		}
	}
	return out
}

// parseLogLine parses one line of a log/slog text or JSON handler.
func parseLogLine(line string) (logRecord, bool) {
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "{") {
		return parseJSONLine(line)
	}
	attrs := map[string]string{}
	for rest := line; rest != ""; {
		rest = strings.TrimLeft(rest, " ")
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 || strings.ContainsAny(rest[:eq], " \"") {
			break
		}
		key := rest[:eq]
		rest = rest[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := closingQuote(rest)
			if end < 0 {
				return logRecord{}, false
			}
			v, err := strconv.Unquote(rest[:end+1])
			if err != nil {
				return logRecord{}, false
			}
			val, rest = v, rest[end+1:]
		} else {
			sp := strings.IndexByte(rest, ' ')
			if sp < 0 {
				sp = len(rest)
			}
			val, rest = rest[:sp], rest[sp:]
		}
		attrs[key] = val
	}
	msg, ok := attrs["msg"]
	if !ok {
		return logRecord{}, false
	}
	r := logRecord{msg: msg, attrs: attrs}
	r.time, _ = time.Parse(time.RFC3339Nano, attrs["time"])
	return r, true
}

// closingQuote is the index of the quote ending the quoted string s
// starts with, or -1.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

func parseJSONLine(line string) (logRecord, bool) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		return logRecord{}, false
	}
	r := logRecord{attrs: map[string]string{}}
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil {
			r.attrs[k] = s
			continue
		}
		if k == "config" {
			var m map[string]string
			if json.Unmarshal(v, &m) == nil {
				r.config = m
				continue
			}
		}
		r.attrs[k] = strings.Trim(string(v), `"`)
	}
	msg, ok := r.attrs["msg"]
	if !ok {
		return logRecord{}, false
	}
	r.msg = msg
	r.time, _ = time.Parse(time.RFC3339Nano, r.attrs["time"])
	return r, true
}
