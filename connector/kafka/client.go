package kafka

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Client says how a connector reaches the brokers.
type Client struct {
	// Brokers are the seed brokers, host:port (bootstrap.servers).
	Brokers []string
	// ClientID names the client to the brokers (client.id); default
	// "weir".
	ClientID string
	// Opts are more franz-go options: TLS (kgo.DialTLSConfig), SASL
	// (kgo.SASL), timeouts. The connectors' own options come after them.
	Opts []kgo.Opt
}

// validate checks the client options.
func (c Client) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("kafka: no brokers: set Client.Brokers (bootstrap.servers), e.g. localhost:9092")
	}
	for _, b := range c.Brokers {
		if b == "" || strings.ContainsAny(b, " \t/") || !strings.Contains(b, ":") {
			return fmt.Errorf("kafka: broker %q: want host:port", b)
		}
	}
	return nil
}

// opts returns the franz-go options of the client, then more.
func (c Client) opts(more ...kgo.Opt) []kgo.Opt {
	id := c.ClientID
	if id == "" {
		id = "weir"
	}
	o := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ClientID(id)}
	o = append(o, c.Opts...)
	return append(o, more...)
}
