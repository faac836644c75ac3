package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
)

// devCommand is `weir dev`: services for trying weir out on one machine.
func (a *app) devCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "dev",
		Short: "Development services (an in-process Kafka broker)",
		Long: `Services for trying weir out on one machine without installing anything.
They are development tools only: never point production jobs at them.`,
		Args: noArgs,
		RunE: a.groupRunE("command"),
	}
	c.AddCommand(a.devKafkaCommand())
	return c
}

// devKafkaCommand is `weir dev kafka`.
func (a *app) devKafkaCommand() *cobra.Command {
	var port, brokers int
	var topics []string
	var dataDir string
	c := &cobra.Command{
		Use:   "kafka",
		Short: "Run an in-process Kafka-compatible broker for development (kfake)",
		Long: `Run kfake, franz-go's in-process implementation of the Kafka protocol, on
127.0.0.1 until Ctrl-C: enough to try the Kafka jobs (kafka-wordcount, the
counter with --kafka-brokers) without a Kafka installation. It speaks the
protocol (produce, fetch, consumer groups, transactions, read_committed), but
it is not Kafka: no replication, data in memory unless --data-dir is set,
its own timings. A development tool only.`,
		Example: `  weir dev kafka --topic words:4 --topic counts:4
  weir run kafka-wordcount --brokers 127.0.0.1:9092 --input-topic words --output-topic counts`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			problems := a.flagProblemsOf(c.Flags())
			if port < 0 || port > 65535 {
				problems = append(problems, fmt.Errorf("--port %d: want 0 (any free port) to 65535", port))
			}
			if brokers < 1 || brokers > 9 {
				problems = append(problems, fmt.Errorf("--brokers %d: want 1 to 9", brokers))
			}
			seeded, err := parseDevTopics(topics)
			if err != nil {
				problems = append(problems, err)
			}
			if len(problems) > 0 {
				return usageError(problems...)
			}
			opts := []kfake.Opt{kfake.NumBrokers(brokers)}
			if port > 0 {
				ports := make([]int, brokers)
				for i := range ports {
					ports[i] = port + i
				}
				opts = append(opts, kfake.Ports(ports...))
			}
			for parts, names := range seeded {
				opts = append(opts, kfake.SeedTopics(parts, names...))
			}
			if dataDir != "" {
				opts = append(opts, kfake.DataDir(dataDir))
			}
			cl, err := kfake.NewCluster(opts...)
			if err != nil {
				return fmt.Errorf("start the broker: %w (is --port %d taken? --port 0 picks free ports)", err, port)
			}
			defer cl.Close()
			addrs := cl.ListenAddrs()
			fmt.Fprintf(a.stdout, "kfake Kafka broker (development only) listening on %s\n", strings.Join(addrs, ","))
			fmt.Fprintf(a.stdout, "use --brokers %s; Ctrl-C stops it\n", strings.Join(addrs, ","))
			<-c.Context().Done()
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&port, "port", 9092, "port of the first broker (the others take the next ports); 0 picks free ports")
	f.IntVar(&brokers, "brokers", 1, "number of brokers")
	f.StringArrayVar(&topics, "topic", nil, "create `name:partitions` at start (repeatable); topics are also created on first use")
	f.StringVar(&dataDir, "data-dir", "", "keep the data in this directory across restarts (default: memory only)")
	return c
}

// parseDevTopics parses --topic values name:partitions (partitions default
// 1) into the topics of each partition count.
func parseDevTopics(vals []string) (map[int32][]string, error) {
	out := map[int32][]string{}
	for _, v := range vals {
		name, parts, found := strings.Cut(v, ":")
		n := int64(1)
		if found {
			var err error
			if n, err = strconv.ParseInt(parts, 10, 32); err != nil || n < 1 {
				return nil, fmt.Errorf("--topic %q: want name:partitions with partitions a positive number", v)
			}
		}
		if name == "" || strings.ContainsAny(name, " /\\:") {
			return nil, errors.New("--topic " + strconv.Quote(v) + ": want a topic name (letters, digits, '.', '_', '-') and an optional :partitions")
		}
		out[int32(n)] = append(out[int32(n)], name)
	}
	return out, nil
}
