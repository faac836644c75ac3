package stateread

import (
	"context"
	"fmt"
	"strings"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
)

// Listing is what List finds in a snapshot.
type Listing struct {
	Snapshot  SnapshotInfo   `json:"snapshot"`
	Operators []OperatorInfo `json:"operators"`
}

// OperatorInfo is the state of one operator, all subtasks together.
type OperatorInfo struct {
	UID            string `json:"uid"`
	Name           string `json:"name"`
	Parallelism    int    `json:"parallelism"`
	MaxParallelism int    `json:"maxParallelism"`
	// Subtasks is the number of subtasks that left state.
	Subtasks int `json:"subtasks"`
	// KeyCodec is the codec of the keys, if the snapshot says.
	KeyCodec       string              `json:"keyCodec,omitempty"`
	KeyedStates    []KeyedStateInfo    `json:"keyedStates"`
	OperatorStates []OperatorStateInfo `json:"operatorStates"`
	// Timers counts the timers; nil when there are none.
	Timers *TimerCounts `json:"timers,omitempty"`
	// Changelog is set when the keyed state and timers were not read
	// because they need a changelog replay: the number of log records.
	Changelog int64 `json:"changelogRecords,omitempty"`
}

// KeyedStateInfo is one keyed state of an operator.
type KeyedStateInfo struct {
	Name string `json:"name"`
	// Kind is "value", "list" or "map".
	Kind string `json:"kind"`
	TTL  bool   `json:"ttl,omitempty"`
	// Entries is the number of (key, namespace) entries; Items the number
	// of values, list elements or map pairs in them.
	Entries int64 `json:"entries"`
	Items   int64 `json:"items"`
	// Codecs are the codecs' names; nil when the snapshot does not say
	// (written before schemas were recorded).
	Codecs *Codecs `json:"codecs,omitempty"`
}

// Codecs names the codecs of a keyed state.
type Codecs struct {
	Key       string `json:"key,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	MapKey    string `json:"mapKey,omitempty"`
	Value     string `json:"value"`
}

// OperatorStateInfo is one operator list state of an operator.
type OperatorStateInfo struct {
	Name string `json:"name"`
	// Distribution is "split" (redistributed among subtasks on restore)
	// or "union" (every subtask gets every element).
	Distribution string `json:"distribution"`
	Elements     int    `json:"elements"`
}

// TimerCounts counts an operator's timers.
type TimerCounts struct {
	EventTime      int `json:"eventTime"`
	ProcessingTime int `json:"processingTime"`
}

func distribution(union bool) string {
	if union {
		return "union"
	}
	return "split"
}

func codecsOf(key *metadata.CodecRef, sc metadata.StateSchema, ok bool) *Codecs {
	if !ok {
		return nil
	}
	c := &Codecs{Value: sc.Value.Codec}
	if key != nil {
		c.Key = key.Codec
	}
	if sc.MapKey != nil {
		c.MapKey = sc.MapKey.Codec
	}
	if sc.Namespace != nil {
		c.Namespace = sc.Namespace.Codec
	}
	return c
}

// List reads every operator's state and counts it.
func (r *Reader) List(ctx context.Context) (*Listing, error) {
	l := &Listing{Snapshot: r.Info(), Operators: []OperatorInfo{}}
	for i := range r.cp.Operators {
		op := &r.cp.Operators[i]
		info, err := r.operatorInfo(ctx, op)
		if err != nil {
			return nil, err
		}
		l.Operators = append(l.Operators, info)
	}
	return l, nil
}

func (r *Reader) operatorInfo(ctx context.Context, op *metadata.Operator) (OperatorInfo, error) {
	info := OperatorInfo{UID: op.UID, Name: op.Name, Parallelism: op.Parallelism, MaxParallelism: op.MaxParallelism,
		Subtasks: len(op.Subtasks), KeyedStates: []KeyedStateInfo{}, OperatorStates: []OperatorStateInfo{}}
	key, schema := schemaOf(op)
	if key != nil {
		info.KeyCodec = key.Codec
	}
	lists := map[string]*OperatorStateInfo{}
	for _, st := range op.Subtasks {
		for _, l := range st.Lists {
			li, ok := lists[l.Name]
			if !ok {
				li = &OperatorStateInfo{Name: l.Name, Distribution: distribution(l.Union)}
				lists[l.Name] = li
			}
			li.Elements += len(l.Elements)
		}
		if n := changelogRecords(&st); n > 0 {
			info.Changelog += n
		}
	}
	for _, n := range sortedNames(lists) {
		info.OperatorStates = append(info.OperatorStates, *lists[n])
	}
	if info.Changelog > 0 {
		return info, nil
	}

	states := map[string]*streamState{}
	counts := map[string]*KeyedStateInfo{}
	var timers TimerCounts
	for i := range op.Subtasks {
		st := &op.Subtasks[i]
		var table []streamState
		err := r.scanKeyed(ctx, op, st, schema, func(sts []streamState) error {
			table = sts
			for _, s := range sts {
				if err := mergeState(states, s); err != nil {
					return err
				}
			}
			return nil
		}, func(i int, e *entry) error {
			s := table[i]
			c, ok := counts[s.name]
			if !ok {
				c = &KeyedStateInfo{}
				counts[s.name] = c
			}
			c.Entries++
			c.Items += int64(len(e.items))
			return nil
		})
		if err != nil {
			return info, err
		}
		err = r.scanTimers(ctx, op, st, func(t timerEntry) {
			if t.eventTime {
				timers.EventTime++
			} else {
				timers.ProcessingTime++
			}
		})
		if err != nil {
			return info, err
		}
	}
	for _, n := range sortedNames(states) {
		s := states[n]
		ki := KeyedStateInfo{Name: n, Kind: s.kind, TTL: s.ttl}
		if c, ok := counts[n]; ok {
			ki.Entries, ki.Items = c.Entries, c.Items
		}
		sc, ok := schema[n]
		ki.Codecs = codecsOf(key, sc, ok)
		info.KeyedStates = append(info.KeyedStates, ki)
	}
	if timers != (TimerCounts{}) {
		info.Timers = &timers
	}
	return info, nil
}

// Options select what Read returns.
type Options struct {
	// State restricts the dump to the keyed or operator list state of this
	// name ("": every state, and the timers).
	State string
	// Limit caps the entries per state (and the timers); 0 is no limit.
	Limit int
}

// Dump is the state of one operator.
type Dump struct {
	Snapshot       SnapshotInfo        `json:"snapshot"`
	Operator       OperatorHeader      `json:"operator"`
	KeyedStates    []KeyedStateDump    `json:"keyedStates"`
	OperatorStates []OperatorStateDump `json:"operatorStates"`
	// Timers is nil when a state was selected.
	Timers *TimersDump `json:"timers,omitempty"`
}

// OperatorHeader identifies the operator dumped.
type OperatorHeader struct {
	UID            string `json:"uid"`
	Name           string `json:"name"`
	Parallelism    int    `json:"parallelism"`
	MaxParallelism int    `json:"maxParallelism"`
}

// KeyedStateDump is the entries of one keyed state, in key-group order
// (and, within a key group, by encoded key and namespace).
type KeyedStateDump struct {
	Name   string  `json:"name"`
	Kind   string  `json:"kind"`
	TTL    bool    `json:"ttl,omitempty"`
	Codecs *Codecs `json:"codecs,omitempty"`
	// Total is the number of entries; Omitted how many of them are left
	// out by the limit.
	Total   int64   `json:"total"`
	Omitted int64   `json:"omitted,omitempty"`
	Entries []Entry `json:"entries"`
}

// Entry is the state of one (key, namespace): Value for a value state,
// Elements for a list, Map for a map.
type Entry struct {
	KeyGroup  int        `json:"keyGroup"`
	Key       Datum      `json:"key"`
	Namespace *Datum     `json:"namespace,omitempty"`
	Value     *Datum     `json:"value,omitempty"`
	Elements  []Datum    `json:"elements,omitempty"`
	Map       []MapEntry `json:"map,omitempty"`
}

// MapEntry is one pair of a map state.
type MapEntry struct {
	Key   Datum `json:"key"`
	Value Datum `json:"value"`
}

// OperatorStateDump is the elements of one operator list state, by
// subtask.
type OperatorStateDump struct {
	Name         string            `json:"name"`
	Distribution string            `json:"distribution"`
	Total        int               `json:"total"`
	Omitted      int               `json:"omitted,omitempty"`
	Elements     []OperatorElement `json:"elements"`
}

// OperatorElement is an element of an operator list state. Operator
// state's codecs are not recorded: elements are raw.
type OperatorElement struct {
	Subtask int   `json:"subtask"`
	Value   Datum `json:"value"`
}

// TimersDump is an operator's timers, by key group.
type TimersDump struct {
	Total   int          `json:"total"`
	Omitted int          `json:"omitted,omitempty"`
	Timers  []TimerEntry `json:"timers"`
}

// TimerEntry is one timer.
type TimerEntry struct {
	// Domain is "event" or "processing".
	Domain    string `json:"domain"`
	KeyGroup  int    `json:"keyGroup"`
	Key       Datum  `json:"key"`
	Namespace *Datum `json:"namespace,omitempty"`
	// Timestamp is the timer's time, Unix ms.
	Timestamp int64 `json:"timestamp"`
}

// stateDecoders decode one keyed state's parts.
type stateDecoders struct {
	key, ns, mapKey, value valueDecoder
}

// Read dumps the state of operator uid.
func (r *Reader) Read(ctx context.Context, uid string, o Options) (*Dump, error) {
	op, err := r.operator(uid)
	if err != nil {
		return nil, err
	}
	d := &Dump{Snapshot: r.Info(), Operator: OperatorHeader{UID: op.UID, Name: op.Name, Parallelism: op.Parallelism,
		MaxParallelism: op.MaxParallelism}, KeyedStates: []KeyedStateDump{}, OperatorStates: []OperatorStateDump{}}
	key, schema := schemaOf(op)
	keyName := ""
	if key != nil {
		keyName = key.Codec
	}
	keyDec := newValueDecoder(keyName)
	keep := func(n int64) bool { return o.Limit <= 0 || n < int64(o.Limit) }

	// Operator list states, inline in the metadata.
	lists := map[string]*OperatorStateDump{}
	for _, st := range op.Subtasks {
		for _, l := range st.Lists {
			ld, ok := lists[l.Name]
			if !ok {
				ld = &OperatorStateDump{Name: l.Name, Distribution: distribution(l.Union), Elements: []OperatorElement{}}
				lists[l.Name] = ld
			}
			for _, e := range l.Elements {
				if keep(int64(ld.Total)) {
					ld.Elements = append(ld.Elements, OperatorElement{Subtask: st.Index, Value: newValueDecoder("").decode(e)})
				} else {
					ld.Omitted++
				}
				ld.Total++
			}
		}
	}

	// Keyed state and timers.
	states := map[string]*streamState{}
	dumps := map[string]*KeyedStateDump{}
	decs := map[string]*stateDecoders{}
	dumpOf := func(s streamState) (*KeyedStateDump, *stateDecoders) {
		if kd, ok := dumps[s.name]; ok {
			return kd, decs[s.name]
		}
		sc, ok := schema[s.name]
		kd := &KeyedStateDump{Name: s.name, Kind: s.kind, TTL: s.ttl, Codecs: codecsOf(key, sc, ok), Entries: []Entry{}}
		sd := &stateDecoders{key: keyDec, ns: newValueDecoder(""), mapKey: newValueDecoder(""), value: newValueDecoder("")}
		if ok {
			sd.value = newValueDecoder(sc.Value.Codec)
			if sc.MapKey != nil {
				sd.mapKey = newValueDecoder(sc.MapKey.Codec)
			}
			if sc.Namespace != nil {
				sd.ns = newValueDecoder(sc.Namespace.Codec)
			}
		}
		dumps[s.name], decs[s.name] = kd, sd
		return kd, sd
	}
	var timers *TimersDump
	if o.State == "" {
		timers = &TimersDump{Timers: []TimerEntry{}}
	}
	changelog := int64(0)
	for _, st := range op.Subtasks {
		if n := changelogRecords(&st); n > 0 {
			changelog += n
		}
	}
	_, isList := lists[o.State]
	readKeyed := true
	if changelog > 0 {
		if !isList {
			return nil, fmt.Errorf("operator %q: its keyed state is %d changelog records on top of a materialized snapshot: %w", op.UID, changelog, ErrChangelog)
		}
		readKeyed = false // an operator list state was asked for
	}
	for i := range op.Subtasks {
		if !readKeyed {
			break
		}
		st := &op.Subtasks[i]
		var table []streamState
		err := r.scanKeyed(ctx, op, st, schema, func(sts []streamState) error {
			table = sts
			for _, s := range sts {
				if err := mergeState(states, s); err != nil {
					return err
				}
			}
			return nil
		}, func(i int, e *entry) error {
			s := table[i]
			if o.State != "" && s.name != o.State {
				return nil
			}
			kd, sd := dumpOf(s)
			kd.Total++
			if !keep(int64(len(kd.Entries))) {
				kd.Omitted++
				return nil
			}
			kd.Entries = append(kd.Entries, decodeEntry(s, e, sd))
			return nil
		})
		if err != nil {
			return nil, err
		}
		if timers == nil {
			continue
		}
		err = r.scanTimers(ctx, op, st, func(t timerEntry) {
			timers.Total++
			if !keep(int64(len(timers.Timers))) {
				timers.Omitted++
				return
			}
			te := TimerEntry{Domain: "processing", KeyGroup: t.t.KeyGroup, Key: keyDec.decode(t.t.Key), Timestamp: t.t.Timestamp}
			if t.eventTime {
				te.Domain = "event"
			}
			if len(t.t.Namespace) > 0 {
				ns := newValueDecoder("").decode(t.t.Namespace)
				te.Namespace = &ns
			}
			timers.Timers = append(timers.Timers, te)
		})
		if err != nil {
			return nil, err
		}
	}
	if o.State != "" {
		if _, ok := states[o.State]; !ok && !isList {
			return nil, r.unknownState(op, o.State, states, lists)
		}
	}
	for _, n := range sortedNames(states) {
		if o.State != "" && n != o.State {
			continue
		}
		kd, _ := dumpOf(*states[n])
		kd.TTL = states[n].ttl
		d.KeyedStates = append(d.KeyedStates, *kd)
	}
	for _, n := range sortedNames(lists) {
		if o.State != "" && n != o.State {
			continue
		}
		d.OperatorStates = append(d.OperatorStates, *lists[n])
	}
	if timers != nil && timers.Total > 0 {
		d.Timers = timers
	}
	return d, nil
}

func (r *Reader) unknownState(op *metadata.Operator, name string, states map[string]*streamState, lists map[string]*OperatorStateDump) error {
	var have []string
	for _, n := range sortedNames(states) {
		have = append(have, fmt.Sprintf("%q (keyed %s)", n, states[n].kind))
	}
	for _, n := range sortedNames(lists) {
		have = append(have, fmt.Sprintf("%q (operator list)", n))
	}
	if len(have) == 0 {
		return fmt.Errorf("%w %q: operator %q has no state in the snapshot", ErrUnknownState, name, op.UID)
	}
	return fmt.Errorf("%w %q: operator %q has the states %s", ErrUnknownState, name, op.UID, strings.Join(have, ", "))
}

// decodeEntry decodes an entry of state s (copying what it keeps).
func decodeEntry(s streamState, e *entry, sd *stateDecoders) Entry {
	out := Entry{KeyGroup: e.keyGroup, Key: sd.key.decode(e.key)}
	if len(e.ns) > 0 {
		ns := sd.ns.decode(e.ns)
		out.Namespace = &ns
	}
	switch s.kind {
	case "value":
		v := sd.value.decode(e.items[0].value)
		v.TTL = e.items[0].ts
		out.Value = &v
	case "list":
		out.Elements = make([]Datum, len(e.items))
		for i, it := range e.items {
			out.Elements[i] = sd.value.decode(it.value)
			out.Elements[i].TTL = it.ts
		}
	case "map":
		out.Map = make([]MapEntry, len(e.items))
		for i, it := range e.items {
			out.Map[i] = MapEntry{Key: sd.mapKey.decode(it.mapKey), Value: sd.value.decode(it.value)}
			out.Map[i].Value.TTL = it.ts
		}
	}
	return out
}
