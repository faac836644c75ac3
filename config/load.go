package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load builds a Config from optional YAML bytes (nil or empty for none) and
// then --set style "key=value" items; later settings win, so the precedence
// is defaults < YAML < sets, and among sets the last one wins.
//
// Everything is validated before Load returns: on failure the Config is nil
// and the error is an errors.Join of *Error values, one per problem, in input
// order (YAML first, then sets). Error sources in the YAML are "line N";
// use LoadFile to get "file.yaml:N".
func Load(yamlData []byte, sets []string) (*Config, error) {
	return load("", yamlData, sets, nil)
}

// LoadFile is Load with the YAML read from path; path "" means no file. A
// missing or unreadable file is an *Error whose Source is path and which
// wraps the I/O error (so errors.Is(err, fs.ErrNotExist) works); the sets
// are still validated and their problems reported alongside it.
func LoadFile(path string, sets []string) (*Config, error) {
	if path == "" {
		return Load(nil, sets)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		cause := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			cause = pe.Err
		}
		readErr := &Error{Source: path, Msg: "cannot read configuration file: " + cause.Error(), err: err}
		return load(path, nil, sets, readErr)
	}
	return load(path, data, sets, nil)
}

// loader accumulates the problems of one Load.
type loader struct {
	name  string // file name, "" for unnamed YAML
	c     *Config
	errs  []error
	where map[string]string // key -> Source of the setting that won
}

func load(name string, data []byte, sets []string, first *Error) (*Config, error) {
	l := &loader{name: name, c: New(), where: map[string]string{}}
	if first != nil {
		l.errs = append(l.errs, first)
	}
	l.yaml(data)
	for _, item := range sets {
		l.setItem(item)
	}
	l.crossCheck()
	if len(l.errs) > 0 {
		return nil, errors.Join(l.errs...)
	}
	return l.c, nil
}

func (l *loader) fail(e *Error) { l.errs = append(l.errs, e) }

func (l *loader) source(line int) string {
	switch {
	case line <= 0 && l.name == "":
		return ""
	case line <= 0:
		return l.name
	case l.name == "":
		return "line " + strconv.Itoa(line)
	}
	return l.name + ":" + strconv.Itoa(line)
}

func (l *loader) apply(key, text, src string) {
	if e := l.c.set(key, text); e != nil {
		e.Source = src
		l.fail(e)
		return
	}
	l.where[key] = src
}

func (l *loader) setItem(item string) {
	k, v, found := strings.Cut(item, "=")
	key := strings.TrimSpace(k)
	switch {
	case !found:
		l.fail(&Error{Value: item, Source: "--set", Msg: fmt.Sprintf("invalid item %q: expected the form key=value", item)})
	case key == "":
		l.fail(&Error{Value: item, Source: "--set", Msg: fmt.Sprintf("invalid item %q: empty key; expected the form key=value", item)})
	default:
		l.apply(key, strings.TrimSpace(v), "--set")
	}
}

// crossCheck reports inconsistencies between keys that are each valid.
func (l *loader) crossCheck() {
	const pKey, mKey = "parallelism.default", "pipeline.max-parallelism"
	p, m := l.c.Int(pKey), l.c.Int(mKey)
	if m != -1 && p > m {
		l.fail(&Error{Key: mKey, Value: strconv.FormatInt(m, 10), Source: l.where[mKey],
			Msg: fmt.Sprintf("%q (%d) must not be less than %q (%d)", mKey, m, pKey, p)})
	}
	const segKey, minKey = "taskmanager.memory.segment-size", "taskmanager.memory.min-segment-size"
	if seg, least := l.c.MemorySize(segKey), l.c.MemorySize(minKey); least > seg {
		l.fail(&Error{Key: minKey, Value: strconv.FormatInt(least, 10), Source: l.where[minKey],
			Msg: fmt.Sprintf("%q (%d bytes) must not be greater than %q (%d bytes)", minKey, least, segKey, seg)})
	}
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlSyntaxError converts a yaml.v3 parse error to an *Error with the line
// moved into Source.
func (l *loader) yamlSyntaxError(err error) *Error {
	msg := err.Error()
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	return &Error{Source: l.source(line), Msg: "invalid YAML: " + msg}
}

// entry is one flattened key of the YAML file.
type entry struct {
	key    string
	val    *yaml.Node
	line   int
	merged bool   // came from a YAML merge key (<<), so explicit entries override it
	err    *Error // a problem found while flattening, reported in document order
}

func (l *loader) yaml(data []byte) {
	if len(bytes.TrimSpace(data)) == 0 {
		return
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err != io.EOF {
			l.fail(l.yamlSyntaxError(err))
		}
		return
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == io.EOF:
	case err != nil:
		l.fail(l.yamlSyntaxError(err))
	default:
		l.fail(&Error{Source: l.source(extra.Line), Msg: "more than one YAML document; put all keys in one document"})
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return
		}
		root = root.Content[0]
	}
	root = deref(root)
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return // e.g. a file holding only "---"
	}
	if root.Kind != yaml.MappingNode {
		l.fail(&Error{Source: l.source(root.Line), Msg: "the YAML file must be a mapping of configuration keys to values"})
		return
	}

	var entries []entry
	index := map[string]int{} // key -> position in entries
	l.flatten("", root, false, func(e entry) {
		i, seen := index[e.key]
		switch {
		case e.err != nil:
			entries = append(entries, e)
		case !seen:
			index[e.key] = len(entries)
			entries = append(entries, e)
		case entries[i].merged && !e.merged:
			entries[i] = e
		case !entries[i].merged && !e.merged:
			entries = append(entries, entry{err: &Error{Key: e.key, Value: e.val.Value, Source: l.source(e.line),
				Msg: fmt.Sprintf("key %q is set more than once (first at %s)", e.key, l.source(entries[i].line))}})
		}
		// A merged entry never overrides an earlier one: explicit entries
		// win, and among merged maps the first wins, as in YAML.
	})

	for _, e := range entries {
		if e.err != nil {
			l.fail(e.err)
			continue
		}
		src := l.source(e.line)
		o, known := registry.byKey[e.key]
		if !known {
			u := unknownKeyError(e.key, e.val.Value)
			u.Source = src
			l.fail(u)
			continue
		}
		switch {
		case e.val.Kind == yaml.SequenceNode:
			l.fail(&Error{Key: e.key, Source: src, Msg: fmt.Sprintf("key %q must have a single value, not a list", e.key)})
		case e.val.Kind != yaml.ScalarNode:
			l.fail(&Error{Key: e.key, Source: src, Msg: fmt.Sprintf("key %q must have a single value", e.key)})
		case e.val.ShortTag() == "!!null":
			msg := fmt.Sprintf("key %q has no value", e.key)
			if o.Kind == KindString {
				msg += `; write "" for an empty string`
			}
			l.fail(&Error{Key: e.key, Value: e.val.Value, Source: src, Msg: msg})
		default:
			l.apply(e.key, e.val.Value, src)
		}
	}
}

// flatten walks mapping m, joining nested keys with dots, and calls emit for
// every non-mapping value in document order. Merge keys (<<) are expanded
// before the mapping's own entries.
func (l *loader) flatten(prefix string, m *yaml.Node, merged bool, emit func(entry)) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	for pass := 0; pass < 2; pass++ {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], deref(m.Content[i+1])
			isMerge := k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge"
			if isMerge != (pass == 0) {
				continue
			}
			if isMerge {
				l.flattenMerge(prefix, k, v, emit)
				continue
			}
			if k.Kind != yaml.ScalarNode {
				emit(entry{err: &Error{Source: l.source(k.Line), Msg: "mapping keys must be plain strings"}})
				continue
			}
			key := join(k.Value)
			if v.Kind == yaml.MappingNode {
				l.flatten(key, v, merged, emit)
				continue
			}
			emit(entry{key: key, val: v, line: k.Line, merged: merged})
		}
	}
}

func (l *loader) flattenMerge(prefix string, k, v *yaml.Node, emit func(entry)) {
	var maps []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		maps = []*yaml.Node{v}
	case yaml.SequenceNode:
		for _, c := range v.Content {
			maps = append(maps, deref(c))
		}
	}
	for _, mm := range maps {
		if mm.Kind != yaml.MappingNode {
			emit(entry{err: &Error{Source: l.source(k.Line), Msg: "a merge key (<<) must refer to a mapping or a list of mappings"}})
			return
		}
	}
	for _, mm := range maps {
		l.flatten(prefix, mm, true, emit)
	}
}

// deref follows YAML aliases.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}
