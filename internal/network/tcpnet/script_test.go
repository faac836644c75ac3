package tcpnet

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/internal/network"
)

// scriptCase is one command of a datadriven script and its expected output.
type scriptCase struct {
	pos      string
	cmd      string
	args     []datadriven.CmdArg
	expected []string
}

// readScript parses a datadriven file: command, "----", output up to a
// blank line; comments and blank lines between.
func readScript(t *testing.T, path string) []scriptCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []scriptCase
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		cmd, args, err := datadriven.ParseLine(text)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		c := scriptCase{pos: fmt.Sprintf("%s:%d", path, line), cmd: cmd, args: args}
		if !sc.Scan() || sc.Text() != "----" {
			t.Fatalf("%s: no ---- after the command", c.pos)
		}
		line++
		for sc.Scan() {
			line++
			if sc.Text() == "" {
				break
			}
			c.expected = append(c.expected, sc.Text())
		}
		cases = append(cases, c)
	}
	return cases
}

func (c *scriptCase) arg(key string, def int) int {
	for _, a := range c.args {
		if a.Key == key && len(a.Vals) > 0 {
			v, err := strconv.Atoi(a.Vals[0])
			if err == nil {
				return v
			}
		}
	}
	return def
}

func (c *scriptCase) str(key string) string {
	for _, a := range c.args {
		if a.Key == key {
			if len(a.Vals) == 0 {
				return "true"
			}
			return a.Vals[0]
		}
	}
	return ""
}

// labelOf names a buffer as the network package's scripts do.
func labelOf(b *network.Buffer) string {
	if b.IsData() {
		return string(b.Data)
	}
	ev := b.Event
	switch ev.Kind {
	case network.EventBarrier:
		if ev.Priority {
			return fmt.Sprintf("P%d", ev.ID)
		}
		return fmt.Sprintf("B%d", ev.ID)
	case network.EventWatermark:
		return fmt.Sprintf("W%d", ev.Timestamp)
	case network.EventEndOfPartition:
		return "EOP"
	case network.EventEndOfData:
		return "EOD"
	}
	return ev.Kind.String()
}

var (
	senderLine   = regexp.MustCompile(`^ch(\d+) sender: queue=\[([^\]]*)\] backlog=(\d+) credit=(\d+)$`)
	receiverLine = regexp.MustCompile(`^ch(\d+) receiver: queue=\[([^\]]*)\]`)
)

// exchangeSide is one consumer's gate fed by one subpartition per channel
// through some transport, as the network package's script exchange.
type exchangeSide struct {
	gate   *network.InputGate
	subs   []*network.PipelinedSubpartition
	credit func(ch int) int // the credit the channel's transport holds
	pool   *network.Pool
	next   []int
	held   [][]*network.Buffer
	ended  []bool
}

func newSide(channels, exclusive, floating int) *exchangeSide {
	x := &exchangeSide{gate: network.NewInputGate(channels, exclusive, floating), pool: network.NewPool(64, 16),
		next: make([]int, channels), held: make([][]*network.Buffer, channels), ended: make([]bool, channels)}
	for range channels {
		x.subs = append(x.subs, network.NewPipelinedSubpartition())
	}
	return x
}

// newLocalSide connects the channels with network.LocalConnection.
func newLocalSide(channels, exclusive, floating int) *exchangeSide {
	x := newSide(channels, exclusive, floating)
	conns := make([]*network.LocalConnection, channels)
	for ch, sub := range x.subs {
		conns[ch] = network.ConnectLocal(sub, x.gate, ch)
	}
	x.credit = func(ch int) int { return conns[ch].Credit() }
	return x
}

// newTCPSide connects the channels over two nodes: senders on a, the gate
// on b.
func newTCPSide(t *testing.T, a, b testNode, channels, exclusive, floating int) *exchangeSide {
	x := newSide(channels, exclusive, floating)
	_, capacity := x.gate.BufferUsage()
	rpool := network.NewPool(max(capacity, 1), 16)
	ids := make([]ChannelID, channels)
	for ch, sub := range x.subs {
		ids[ch] = ChannelID{Attempt: 1, From: uint32(ch)}
		if err := a.ConnectSender(b.Addr(), ids[ch], sub); err != nil {
			t.Fatal(err)
		}
		if err := b.ConnectReceiver(context.Background(), a.Addr(), ids[ch], x.gate, ch, rpool); err != nil {
			t.Fatal(err)
		}
	}
	x.credit = func(ch int) int { return senderCredit(a.Node, b.Addr(), ids[ch]) }
	return x
}

// TestExchangeScriptsOverTCP replays the network package's exchange
// scripts over two nodes, waiting after every command until nothing is in
// flight, next to the same commands over the in-process transport
// (LocalConnection), which moves buffers as soon as credit allows, as this
// transport does. After every command the two must agree on what the
// consumer polled, every sender's queue, backlog and credit, the buffers
// queued at the gate and its usage, and the credit accounting must hold.
// Sessions with the local transport are also checked against the scripts'
// expectations; in sessions with the manual transport, whose "transfer"
// decides when buffers move (which TCP does not let a script do), buffers
// move at once instead and only the two transports are compared.
func TestExchangeScriptsOverTCP(t *testing.T) {
	cases := readScript(t, "../testdata/exchange.txt")
	var local, remote *exchangeSide
	var a, b testNode
	checkScript := false
	commands := 0
	for _, c := range cases {
		if c.cmd == "init" {
			channels, exclusive, floating := c.arg("channels", 1), c.arg("exclusive", 2), c.arg("floating", 0)
			checkScript = c.str("transport") == "local"
			a, b = newNode(t, Config{}), newNode(t, Config{})
			local = newLocalSide(channels, exclusive, floating)
			remote = newTCPSide(t, a, b, channels, exclusive, floating)
		}
		if c.cmd == "transfer" {
			continue
		}
		commands++
		want := local.run(t, &c)
		got := remote.run(t, &c)
		quiesce(t, a.Node, b.Node)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: %s over TCP printed\n%s\nlocally:\n%s", c.pos, c.cmd, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		remote.compare(t, c.pos, local)
		if checkScript {
			remote.check(t, &c, got)
		}
		checkNoLoss(t, a, b)
	}
	t.Logf("replayed %d commands", commands)
}

// run performs c and returns the lines it prints before the state.
func (x *exchangeSide) run(t *testing.T, c *scriptCase) []string {
	var out []string
	ch := c.arg("ch", 0)
	switch c.cmd {
	case "init", "state":
	case "send":
		sub := x.subs[ch]
		switch {
		case c.str("data") != "":
			for range c.arg("data", 0) {
				x.next[ch]++
				sub.Send(fill(t, x.pool, network.KindData, fmt.Appendf(nil, "d%d", x.next[ch])))
			}
		case c.str("priority") != "":
			sub.SendPriority(network.NewEventBuffer(network.Event{Kind: network.EventBarrier, ID: int64(c.arg("id", 0)), Priority: true}), nil)
		default:
			id := int64(c.arg("id", 0))
			ev := network.Event{ID: id, Timestamp: id}
			switch c.str("event") {
			case "watermark":
				ev.Kind = network.EventWatermark
			case "barrier":
				ev.Kind = network.EventBarrier
			case "eop":
				ev.Kind = network.EventEndOfPartition
			case "eod":
				ev.Kind = network.EventEndOfData
			default:
				t.Fatalf("%s: unknown event %q", c.pos, c.str("event"))
			}
			sub.Send(network.NewEventBuffer(ev))
		}
	case "poll":
		for range c.arg("n", 1) {
			// Over TCP, everything sent has arrived (the previous
			// command quiesced): an empty gate stays empty.
			pch, b, ok := x.gate.Poll()
			if !ok {
				out = append(out, "poll: none")
				break
			}
			out = append(out, fmt.Sprintf("poll: ch%d %s", pch, labelOf(b)))
			if b.IsData() {
				x.held[pch] = append(x.held[pch], b)
			}
			if b.Kind == network.KindEvent && b.Event.Kind == network.EventEndOfPartition {
				x.ended[pch] = true
			}
		}
	case "release":
		if len(x.held[ch]) == 0 {
			t.Fatalf("%s: ch%d holds no buffer", c.pos, ch)
		}
		b := x.held[ch][0]
		x.held[ch] = x.held[ch][1:]
		x.gate.Release(ch, b)
	case "block":
		x.gate.Block(ch)
	case "unblock":
		x.gate.Unblock(ch)
	default:
		t.Fatalf("%s: unknown command %q", c.pos, c.cmd)
	}
	return out
}

// compare checks that x and the reference side y are in the same state.
func (x *exchangeSide) compare(t *testing.T, pos string, y *exchangeSide) {
	t.Helper()
	for ch := range x.subs {
		xs, ys := x.subs[ch], y.subs[ch]
		if xs.Queued() != ys.Queued() || xs.Backlog() != ys.Backlog() || (!x.ended[ch] && x.credit(ch) != y.credit(ch)) {
			t.Errorf("%s: ch%d sender over TCP: %d queued, backlog %d, credit %d; locally %d, %d, %d",
				pos, ch, xs.Queued(), xs.Backlog(), x.credit(ch), ys.Queued(), ys.Backlog(), y.credit(ch))
		}
	}
	xu, _ := x.gate.BufferUsage()
	yu, _ := y.gate.BufferUsage()
	if xq, yq := x.gate.QueuedBuffers(), y.gate.QueuedBuffers(); xq != yq || xu != yu {
		t.Errorf("%s: the gate over TCP queues %d buffers and uses %d; locally %d and %d", pos, xq, xu, yq, yu)
	}
	if err := x.gate.CheckCredit(); err != nil {
		t.Errorf("%s: %v", pos, err)
	}
}

// check compares the state after c with the script's expectations.
func (x *exchangeSide) check(t *testing.T, c *scriptCase, got []string) {
	t.Helper()
	var want []string
	queued := 0
	for _, line := range c.expected {
		switch {
		case strings.HasPrefix(line, "poll:"):
			want = append(want, line)
		case senderLine.MatchString(line):
			m := senderLine.FindStringSubmatch(line)
			ch, _ := strconv.Atoi(m[1])
			items := len(strings.Fields(m[2]))
			backlog, _ := strconv.Atoi(m[3])
			credit, _ := strconv.Atoi(m[4])
			sub := x.subs[ch]
			if sub.Queued() != items || sub.Backlog() != backlog || (!x.ended[ch] && x.credit(ch) != credit) {
				t.Errorf("%s: ch%d sender: %d queued, backlog %d, credit %d; script: %s",
					c.pos, ch, sub.Queued(), sub.Backlog(), x.credit(ch), line)
			}
		case receiverLine.MatchString(line):
			queued += len(strings.Fields(receiverLine.FindStringSubmatch(line)[2]))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: %s printed\n%s\nscript:\n%s", c.pos, c.cmd, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := x.gate.QueuedBuffers(); n != queued {
		t.Errorf("%s: the gate queues %d buffers, script %d", c.pos, n, queued)
	}
}
