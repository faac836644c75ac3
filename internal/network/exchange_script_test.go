package network

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// manualTransport is a transport the script moves by hand: it holds the
// credit the receiver granted and delivers only on "transfer", as a TCP
// transport's writer would when its connection can take more.
type manualTransport struct {
	sub    *PipelinedSubpartition
	in     InputChannel
	credit int
	known  int // the backlog the receiver last learned
}

func (m *manualTransport) NotifyDataAvailable() {}
func (m *manualTransport) AddCredit(n int)      { m.credit += n }

// transfer moves up to max buffers (all that credit allows if max < 0) and
// describes each message.
func (m *manualTransport) transfer(max int, sb *strings.Builder) {
	for moved := 0; max < 0 || moved < max; {
		b, backlog := m.sub.PollNext(m.credit)
		if b == nil {
			if backlog == m.known {
				return
			}
			m.known = backlog
			n := m.in.OnBacklog(backlog)
			m.credit += n
			fmt.Fprintf(sb, "announce backlog=%d: +%d credit\n", backlog, n)
			if m.credit == 0 {
				return
			}
			continue
		}
		moved++
		if b.IsData() {
			m.credit--
		}
		m.known = backlog
		label := labelOf(b)
		n, err := m.in.OnBuffer(b, backlog)
		if err != nil {
			fmt.Fprintf(sb, "%s backlog=%d: error: %v\n", label, backlog, err)
			return
		}
		fmt.Fprintf(sb, "%s backlog=%d", label, backlog)
		if n > 0 {
			fmt.Fprintf(sb, ": +%d credit", n)
		}
		sb.WriteByte('\n')
		m.credit += n
	}
}

// labelOf names a script buffer: data buffers carry their label as bytes.
func labelOf(b *Buffer) string {
	if b.IsData() {
		return string(b.Data)
	}
	ev := b.Event
	switch ev.Kind {
	case EventBarrier:
		if ev.Priority {
			return fmt.Sprintf("P%d", ev.ID)
		}
		return fmt.Sprintf("B%d", ev.ID)
	case EventWatermark:
		return fmt.Sprintf("W%d", ev.Timestamp)
	case EventEndOfPartition:
		return "EOP"
	case EventEndOfData:
		return "EOD"
	}
	return ev.Kind.String()
}

func labelsOf(q *bufQueue[*Buffer]) string {
	parts := make([]string, q.len())
	for i := range parts {
		parts[i] = labelOf(q.at(i))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// exchange is one consumer's input gate fed by one subpartition per channel,
// through local connections or manual transports.
type exchange struct {
	gate   *InputGate
	subs   []*PipelinedSubpartition
	local  []*LocalConnection
	manual []*manualTransport
	next   []int       // per channel: number of the next data buffer
	held   [][]*Buffer // per channel: polled data buffers not yet released
}

func newExchange(channels, exclusive, floating int, transport string) (*exchange, error) {
	x := &exchange{gate: NewInputGate(channels, exclusive, floating),
		subs: make([]*PipelinedSubpartition, channels), next: make([]int, channels),
		held: make([][]*Buffer, channels)}
	for ch := range channels {
		x.subs[ch] = NewPipelinedSubpartition()
		switch transport {
		case "local":
			x.local = append(x.local, ConnectLocal(x.subs[ch], x.gate, ch))
		case "manual":
			m := &manualTransport{sub: x.subs[ch]}
			m.in, m.credit = x.gate.Connect(ch, m)
			x.subs[ch].SetListener(m)
			x.manual = append(x.manual, m)
		default:
			return nil, fmt.Errorf("unknown transport %q", transport)
		}
	}
	return x, nil
}

func (x *exchange) credit(ch int) int {
	if x.local != nil {
		return x.local[ch].Credit()
	}
	return x.manual[ch].credit
}

// String renders both sides of every channel and then the accounting.
func (x *exchange) String() string {
	var sb strings.Builder
	for ch, sub := range x.subs {
		sub.mu.Lock()
		fmt.Fprintf(&sb, "ch%d sender: queue=%s backlog=%d credit=%d\n", ch, labelsOf(&sub.q), sub.backlog, x.credit(ch))
		sub.mu.Unlock()
	}
	x.gate.mu.Lock()
	for ch := range x.gate.chans {
		c := &x.gate.chans[ch]
		fmt.Fprintf(&sb, "ch%d receiver: queue=%s", ch, labelsOf(&c.recvQ))
		if len(x.held[ch]) > 0 {
			labels := make([]string, len(x.held[ch]))
			for i, b := range x.held[ch] {
				labels[i] = labelOf(b)
			}
			fmt.Fprintf(&sb, " held=[%s]", strings.Join(labels, " "))
		}
		if c.blocked {
			sb.WriteString(" blocked")
		}
		sb.WriteByte('\n')
	}
	sb.WriteString(x.gate.credit.String())
	x.gate.mu.Unlock()
	return sb.String()
}

// TestExchangeScripts runs the scripts in testdata/exchange*.txt: the sender
// side (PipelinedSubpartition), a transport and the receiver side
// (InputGate) of every channel of one gate, with the test deciding the order
// of every step. Commands:
//
//	init channels=N exclusive=E floating=F transport=local|manual
//	send ch=C data=K           K data buffers, labelled dN per channel
//	send ch=C event=E [id=I]   an event: watermark (W<id>), barrier (B<id>),
//	                           eop, eod; with priority, a priority barrier (P<id>)
//	transfer ch=C [n=K]        manual transport: move up to K buffers, or all
//	                           the credit allows
//	poll [n=K]                 the consumer polls K times (default 1)
//	release ch=C               the consumer releases ch's oldest held buffer
//	block ch=C / unblock ch=C  barrier alignment
//
// Every command prints what it did and then both sides of every channel:
// the sender's queue, backlog and the credit its transport holds; the
// receiver's queue and the buffers the consumer holds; then the credit
// accounting, after checking its invariants. Regenerate with -rewrite.
func TestExchangeScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.Contains(path, "exchange") {
			t.Skip("not an exchange script")
		}
		var x *exchange
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			arg := func(key string, def int) int {
				if !d.HasArg(key) {
					return def
				}
				var v int
				d.ScanArgs(t, key, &v)
				return v
			}
			var sb strings.Builder
			switch d.Cmd {
			case "init":
				transport := "local"
				if d.HasArg("transport") {
					d.ScanArgs(t, "transport", &transport)
				}
				var err error
				x, err = newExchange(arg("channels", 1), arg("exclusive", 2), arg("floating", 0), transport)
				if err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
			case "send":
				ch := arg("ch", 0)
				sub := x.subs[ch]
				switch {
				case d.HasArg("data"):
					for range arg("data", 0) {
						x.next[ch]++
						sub.Send(&Buffer{Data: fmt.Appendf(nil, "d%d", x.next[ch])})
					}
				case d.HasArg("priority"):
					sub.SendPriority(NewEventBuffer(Event{Kind: EventBarrier, ID: int64(arg("id", 0)), Priority: true}), nil)
				case d.HasArg("event"):
					var kind string
					d.ScanArgs(t, "event", &kind)
					ev := Event{ID: int64(arg("id", 0)), Timestamp: int64(arg("id", 0))}
					switch kind {
					case "watermark":
						ev.Kind = EventWatermark
					case "barrier":
						ev.Kind = EventBarrier
					case "eop":
						ev.Kind = EventEndOfPartition
					case "eod":
						ev.Kind = EventEndOfData
					default:
						t.Fatalf("%s: unknown event %q", d.Pos, kind)
					}
					sub.Send(NewEventBuffer(ev))
				default:
					t.Fatalf("%s: send needs data, event or priority", d.Pos)
				}
			case "transfer":
				if x.manual == nil {
					t.Fatalf("%s: transfer needs transport=manual", d.Pos)
				}
				x.manual[arg("ch", 0)].transfer(arg("n", -1), &sb)
			case "poll":
				for range arg("n", 1) {
					ch, b, ok := x.gate.Poll()
					if !ok {
						sb.WriteString("poll: none\n")
						break
					}
					fmt.Fprintf(&sb, "poll: ch%d %s\n", ch, labelOf(b))
					if b.IsData() {
						x.held[ch] = append(x.held[ch], b)
					}
				}
			case "release":
				ch := arg("ch", 0)
				if len(x.held[ch]) == 0 {
					t.Fatalf("%s: ch%d holds no buffer", d.Pos, ch)
				}
				b := x.held[ch][0]
				x.held[ch] = x.held[ch][1:]
				x.gate.Release(ch, b)
			case "block":
				x.gate.Block(arg("ch", 0))
			case "unblock":
				x.gate.Unblock(arg("ch", 0))
			case "state":
			default:
				t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			}
			if err := x.gate.CheckCredit(); err != nil {
				t.Fatalf("%s: invariant broken: %v", d.Pos, err)
			}
			for ch := range x.subs {
				// Nothing is in flight: the transport holds exactly the
				// credit the receiver counts as granted (until the end of
				// partition takes unused floating credit back).
				x.gate.mu.Lock()
				cc := x.gate.credit.chans[ch]
				x.gate.mu.Unlock()
				if c := x.credit(ch); !cc.ended && c != cc.granted {
					t.Fatalf("%s: ch%d transport holds %d credit, receiver granted %d", d.Pos, ch, c, cc.granted)
				}
			}
			sb.WriteString(x.String())
			return sb.String()
		})
	})
}
