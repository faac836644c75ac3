package stateread

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// The text forms of a Listing and a Dump: a header line per operator or
// state, then an indented table.

// describe is the one-line description of the snapshot.
func (s SnapshotInfo) describe() string {
	what := fmt.Sprintf("checkpoint %d of job %q", s.ID, s.Job)
	if s.Savepoint {
		what = fmt.Sprintf("savepoint of checkpoint %d of job %q", s.ID, s.Job)
		if s.Format != "" {
			what += ", " + s.Format + " format"
		}
	}
	what += " (" + s.Path + ")"
	if s.Completed != "" {
		what += ", completed " + s.Completed
	}
	return what
}

// cell makes s fit in a table cell: no tabs or line breaks.
func cell(s string) string {
	if !strings.ContainsAny(s, "\t\n\r") {
		return s
	}
	return strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(s)
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

func (c *Codecs) describe() string {
	if c == nil {
		return "(not recorded)"
	}
	var parts []string
	if c.Key != "" {
		parts = append(parts, "key "+c.Key)
	}
	if c.Namespace != "" {
		parts = append(parts, "namespace "+c.Namespace)
	}
	if c.MapKey != "" {
		parts = append(parts, "map key "+c.MapKey)
	}
	parts = append(parts, "value "+c.Value)
	return strings.Join(parts, ", ")
}

// WriteText writes the listing as text.
func (l *Listing) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("%s\n", l.Snapshot.describe())
	if len(l.Operators) == 0 {
		ew.printf("\nno operator state\n")
	}
	for _, op := range l.Operators {
		ew.printf("\noperator %q (%s): parallelism %d, max parallelism %d", op.UID, op.Name, op.Parallelism, op.MaxParallelism)
		if op.KeyCodec != "" {
			ew.printf(", key codec %s", op.KeyCodec)
		}
		ew.printf("\n")
		empty := true
		if op.Changelog > 0 {
			empty = false
			ew.printf("  keyed state and timers: %d changelog records after the materialized snapshot, not read: take a savepoint to read them\n", op.Changelog)
		}
		if len(op.KeyedStates) > 0 {
			empty = false
			tw := tabwriter.NewWriter(ew.w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  KEYED STATE\tKIND\tTTL\tENTRIES\tITEMS\tCODECS")
			for _, s := range op.KeyedStates {
				ttl := "-"
				if s.TTL {
					ttl = "yes"
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%s\n", cell(s.Name), s.Kind, ttl, s.Entries, s.Items, cell(s.Codecs.describe()))
			}
			ew.flush(tw)
		}
		if op.Timers != nil {
			empty = false
			ew.printf("  timers: %d event time, %d processing time\n", op.Timers.EventTime, op.Timers.ProcessingTime)
		}
		if len(op.OperatorStates) > 0 {
			empty = false
			tw := tabwriter.NewWriter(ew.w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  OPERATOR STATE\tDISTRIBUTION\tELEMENTS")
			for _, s := range op.OperatorStates {
				fmt.Fprintf(tw, "  %s\t%s\t%d\n", cell(s.Name), s.Distribution, s.Elements)
			}
			ew.flush(tw)
		}
		if empty {
			ew.printf("  no state\n")
		}
	}
	return ew.err
}

func (e *errWriter) flush(tw *tabwriter.Writer) {
	if err := tw.Flush(); err != nil && e.err == nil {
		e.err = err
	}
}

// withTTL appends a datum's TTL timestamp.
func withTTL(d Datum) string {
	s := d.String()
	if d.TTL != 0 {
		s += " (ttl " + time.UnixMilli(d.TTL).UTC().Format("2006-01-02T15:04:05.000Z") + ")"
	}
	return cell(s)
}

// WriteText writes the dump as text.
func (d *Dump) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	op := d.Operator
	ew.printf("operator %q (%s), parallelism %d, max parallelism %d, in the %s\n", op.UID, op.Name, op.Parallelism, op.MaxParallelism, d.Snapshot.describe())
	if len(d.KeyedStates) == 0 && len(d.OperatorStates) == 0 && d.Timers == nil {
		ew.printf("\nno state\n")
	}
	for _, s := range d.KeyedStates {
		ew.printf("\nkeyed state %q: %s", s.Name, s.Kind)
		if s.TTL {
			ew.printf(" with TTL")
		}
		ew.printf(", %d entries; codecs: %s\n", s.Total, s.Codecs.describe())
		if len(s.Entries) == 0 && s.Omitted == 0 {
			continue
		}
		hasNS := false
		for _, e := range s.Entries {
			hasNS = hasNS || e.Namespace != nil
		}
		tw := tabwriter.NewWriter(ew.w, 0, 0, 2, ' ', 0)
		head := "  KEY GROUP\tKEY"
		if hasNS {
			head += "\tNAMESPACE"
		}
		switch s.Kind {
		case "value":
			head += "\tVALUE"
		case "list":
			head += "\tELEMENTS"
		case "map":
			head += "\tMAP KEY\tVALUE"
		}
		fmt.Fprintln(tw, head)
		for _, e := range s.Entries {
			prefix := fmt.Sprintf("  %d\t%s", e.KeyGroup, cell(e.Key.String()))
			if hasNS {
				ns := "-"
				if e.Namespace != nil {
					ns = cell(e.Namespace.String())
				}
				prefix += "\t" + ns
			}
			switch s.Kind {
			case "value":
				fmt.Fprintf(tw, "%s\t%s\n", prefix, withTTL(*e.Value))
			case "list":
				elems := make([]string, len(e.Elements))
				for i, el := range e.Elements {
					elems[i] = withTTL(el)
				}
				fmt.Fprintf(tw, "%s\t[%s]\n", prefix, strings.Join(elems, ", "))
			case "map":
				for _, p := range e.Map {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", prefix, cell(p.Key.String()), withTTL(p.Value))
				}
			}
		}
		ew.flush(tw)
		if s.Omitted > 0 {
			ew.printf("  ... %d more\n", s.Omitted)
		}
	}
	for _, s := range d.OperatorStates {
		ew.printf("\noperator list state %q (%s): %d elements\n", s.Name, s.Distribution, s.Total)
		if len(s.Elements) == 0 && s.Omitted == 0 {
			continue
		}
		tw := tabwriter.NewWriter(ew.w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  SUBTASK\tELEMENT")
		for _, e := range s.Elements {
			fmt.Fprintf(tw, "  %d\t%s\n", e.Subtask, cell(e.Value.String()))
		}
		ew.flush(tw)
		if s.Omitted > 0 {
			ew.printf("  ... %d more\n", s.Omitted)
		}
	}
	if t := d.Timers; t != nil {
		ew.printf("\ntimers: %d\n", t.Total)
		hasNS := false
		for _, e := range t.Timers {
			hasNS = hasNS || e.Namespace != nil
		}
		tw := tabwriter.NewWriter(ew.w, 0, 0, 2, ' ', 0)
		head := "  DOMAIN\tKEY GROUP\tKEY"
		if hasNS {
			head += "\tNAMESPACE"
		}
		fmt.Fprintln(tw, head+"\tTIMESTAMP")
		for _, e := range t.Timers {
			row := fmt.Sprintf("  %s\t%d\t%s", e.Domain, e.KeyGroup, cell(e.Key.String()))
			if hasNS {
				ns := "-"
				if e.Namespace != nil {
					ns = cell(e.Namespace.String())
				}
				row += "\t" + ns
			}
			fmt.Fprintf(tw, "%s\t%d\n", row, e.Timestamp)
		}
		ew.flush(tw)
		if t.Omitted > 0 {
			ew.printf("  ... %d more\n", t.Omitted)
		}
	}
	return ew.err
}
