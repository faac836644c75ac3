package network

import (
	"fmt"
	"strings"
)

// Grant is credit the receiver owes a sender: N more data buffers may be sent
// on Channel.
type Grant struct {
	Channel int
	N       int
}

// CreditGate is the receiver-side credit accounting of one input gate. It is a
// deterministic state machine with no goroutines, clock or I/O: the caller
// feeds it what happened (a buffer arrived, a buffer was consumed, a sender
// announced its backlog) and drains the credits to send with Grants. It is not
// safe for concurrent use.
//
// Every channel owns Exclusive buffer slots for its whole life. The gate owns
// Floating slots, lent to channels whose sender announced a backlog larger
// than the credit it already holds, in the order they asked, and taken back
// when such a channel consumes a buffer while its backlog is covered. A
// channel's slots are always in one of three states: pending (credit not yet
// sent), granted (credit the sender holds) or queued (a received buffer not
// yet consumed); so pending+granted+queued = Exclusive + floating held.
type CreditGate struct {
	exclusive     int
	floatingTotal int
	floatingFree  int
	chans         []creditChannel
	dirty         []int // channels with pending > 0, each once
	waiting       []int // channels that want floating slots, FIFO, each once
}

type creditChannel struct {
	pending, granted, queued int
	floating                 int
	backlog                  int
	dirty, waiting, ended    bool
}

// NewCreditGate returns the accounting for channels input channels with
// exclusive slots each and floating slots shared. All exclusive credit is
// pending at first, so the first Grants announces it.
func NewCreditGate(channels, exclusive, floating int) *CreditGate {
	g := &CreditGate{exclusive: exclusive, floatingTotal: floating, floatingFree: floating,
		chans: make([]creditChannel, channels)}
	for i := range g.chans {
		g.chans[i].pending = exclusive
		if exclusive > 0 {
			g.markDirty(i)
		}
	}
	return g
}

func (g *CreditGate) markDirty(ch int) {
	if c := &g.chans[ch]; !c.dirty {
		c.dirty = true
		g.dirty = append(g.dirty, ch)
	}
}

// Grants appends the credit owed to senders to dst, in the order it became
// owed, marks it as sent, and returns the extended slice.
func (g *CreditGate) Grants(dst []Grant) []Grant {
	for _, ch := range g.dirty {
		c := &g.chans[ch]
		c.dirty = false
		if c.pending > 0 {
			dst = append(dst, Grant{Channel: ch, N: c.pending})
			c.granted += c.pending
			c.pending = 0
		}
	}
	g.dirty = g.dirty[:0]
	return dst
}

// OnBuffer records that the sender of ch delivered a data buffer and still has
// backlog buffers queued behind it.
func (g *CreditGate) OnBuffer(ch, backlog int) error {
	c := &g.chans[ch]
	if c.granted == 0 {
		return fmt.Errorf("%w (channel %d)", ErrNoCredit, ch)
	}
	c.granted--
	c.queued++
	g.OnBacklog(ch, backlog)
	return nil
}

// OnBacklog records the sender's backlog of ch: buffers it has ready but no
// credit for. A backlog beyond the channel's outstanding credit asks for
// floating slots.
func (g *CreditGate) OnBacklog(ch, backlog int) {
	c := &g.chans[ch]
	if c.ended {
		return
	}
	c.backlog = backlog
	for g.wants(ch) && g.floatingFree > 0 {
		g.lendFloating(ch)
	}
	if g.wants(ch) && !c.waiting {
		c.waiting = true
		g.waiting = append(g.waiting, ch)
	}
}

func (g *CreditGate) wants(ch int) bool {
	c := &g.chans[ch]
	return !c.ended && c.backlog > c.pending+c.granted
}

func (g *CreditGate) lendFloating(ch int) {
	c := &g.chans[ch]
	g.floatingFree--
	c.floating++
	c.pending++
	g.markDirty(ch)
}

// OnRelease records that the receiver consumed one buffer of ch. The freed
// slot is credited again, or given back to the gate if it was floating and
// the channel's backlog is covered.
func (g *CreditGate) OnRelease(ch int) {
	c := &g.chans[ch]
	if c.queued == 0 {
		panic(fmt.Sprintf("network: release on channel %d with nothing queued", ch))
	}
	c.queued--
	switch {
	case c.floating > 0 && !g.wants(ch):
		c.floating--
		g.floatingFree++
		g.serveWaiting()
	case c.ended:
		// An exclusive slot of a finished channel stays idle.
	default:
		c.pending++
		g.markDirty(ch)
	}
}

// OnEndOfPartition records that ch will deliver no more data. Floating
// credit it holds but has not used goes back to the gate.
func (g *CreditGate) OnEndOfPartition(ch int) {
	c := &g.chans[ch]
	c.ended = true
	c.backlog = 0
	unused := min(c.floating, c.pending+c.granted)
	fromPending := min(unused, c.pending)
	c.pending -= fromPending
	c.granted -= unused - fromPending
	c.floating -= unused
	g.floatingFree += unused
	g.serveWaiting()
}

func (g *CreditGate) serveWaiting() {
	for g.floatingFree > 0 && len(g.waiting) > 0 {
		ch := g.waiting[0]
		if g.wants(ch) {
			g.lendFloating(ch)
			if g.wants(ch) {
				continue
			}
		}
		g.waiting = g.waiting[1:]
		g.chans[ch].waiting = false
	}
}

// Check verifies the accounting invariants and returns an error naming the
// first one broken. Tests call it after every step.
func (g *CreditGate) Check() error {
	lent := 0
	for i, c := range g.chans {
		if c.pending < 0 || c.granted < 0 || c.queued < 0 || c.floating < 0 {
			return fmt.Errorf("channel %d: negative count %+v", i, c)
		}
		if !c.ended && c.pending+c.granted+c.queued != g.exclusive+c.floating {
			return fmt.Errorf("channel %d: pending %d + granted %d + queued %d != exclusive %d + floating %d",
				i, c.pending, c.granted, c.queued, g.exclusive, c.floating)
		}
		lent += c.floating
	}
	if lent+g.floatingFree != g.floatingTotal {
		return fmt.Errorf("floating: lent %d + free %d != total %d", lent, g.floatingFree, g.floatingTotal)
	}
	return nil
}

// String renders the state, one line per channel, for script tests.
func (g *CreditGate) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "floating free=%d/%d", g.floatingFree, g.floatingTotal)
	if len(g.waiting) > 0 {
		fmt.Fprintf(&sb, " waiting=%v", g.waiting)
	}
	sb.WriteByte('\n')
	for i, c := range g.chans {
		fmt.Fprintf(&sb, "ch%d: pending=%d granted=%d queued=%d floating=%d backlog=%d", i, c.pending, c.granted, c.queued, c.floating, c.backlog)
		if c.ended {
			sb.WriteString(" ended")
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}
