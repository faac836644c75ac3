package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirstream/weir/config"
)

// jobsCommand is `weir jobs`.
func (a *app) jobsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "jobs",
		Short: "List the built-in jobs and their flags",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var b strings.Builder
			for _, name := range a.registry.Names() {
				job, _ := a.registry.New(name)
				fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
				job.RegisterFlags(fs)
				fmt.Fprintf(&b, "%s\n    %s\n", name, job.Description())
				if usage := fs.FlagUsages(); usage != "" {
					fmt.Fprintf(&b, "  Flags:\n%s", indentLines(usage, "  "))
				}
				b.WriteByte('\n')
			}
			b.WriteString("Every job also takes the common flags --parallelism, --set and --config\n" +
				"(see 'weir run --help'). Run a job with 'weir run <job> [flags]'.\n")
			_, err := a.stdout.Write([]byte(b.String()))
			return err
		},
	}
}

// configCommand is `weir config`, grouping `weir config keys`.
func (a *app) configCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Inspect weir's configuration keys",
		Args:  cobra.ArbitraryArgs,
		RunE:  a.groupRunE("command"),
	}
	c.AddCommand(&cobra.Command{
		Use:   "keys",
		Short: "List every configuration key with its kind, default, valid values and description",
		Long: `List every configuration key weir knows, with its kind, default, valid
values and description. Set keys with 'weir run --set key=value' or in a YAML
file given with --config; docs/config.md describes the value syntax.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var b strings.Builder
			for i, o := range config.Options() {
				if i > 0 {
					b.WriteByte('\n')
				}
				def := o.Default
				if def == "" {
					def = `""`
				}
				fmt.Fprintf(&b, "%s\n    kind: %s    default: %s\n", o.Key, o.Kind, def)
				if v := o.Constraint(); v != "" {
					fmt.Fprintf(&b, "    valid: %s\n", v)
				}
				for _, line := range wrap(o.Description, 72) {
					fmt.Fprintf(&b, "    %s\n", line)
				}
			}
			_, err := a.stdout.Write([]byte(b.String()))
			return err
		},
	})
	return c
}

// indentLines prefixes every non-empty line of s with indent.
func indentLines(s, indent string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = indent + l
		}
	}
	return strings.Join(lines, "")
}

// wrap breaks text into lines of at most width bytes at spaces; longer
// words get a line of their own.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
