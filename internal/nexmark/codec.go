package nexmark

import (
	"encoding/binary"
	"fmt"

	"github.com/weirstream/weir/codec"
)

// EventCodec returns the binary codec of Event for network edges: a kind
// byte, then the fields of the kind's struct in declaration order, integers
// as zig-zag varints and strings as a uvarint length and the bytes.
// Decoding rejects an unknown kind, truncated input, non-minimal or
// overflowing varints and lengths beyond the input with an error wrapping
// codec.ErrCorrupt.
func EventCodec() codec.Codec[Event] { return eventCodec }

var eventCodec = codec.Func(appendEvent, decodeEvent)

func appendEvent(b []byte, e Event) []byte {
	b = append(b, byte(e.Kind))
	switch e.Kind {
	case KindPerson:
		p := e.Person
		b = binary.AppendVarint(b, p.ID)
		b = appendString(b, p.Name)
		b = appendString(b, p.EmailAddress)
		b = appendString(b, p.CreditCard)
		b = appendString(b, p.City)
		b = appendString(b, p.State)
		b = binary.AppendVarint(b, p.DateTime)
		b = appendString(b, p.Extra)
	case KindAuction:
		a := e.Auction
		b = binary.AppendVarint(b, a.ID)
		b = appendString(b, a.ItemName)
		b = appendString(b, a.Description)
		b = binary.AppendVarint(b, a.InitialBid)
		b = binary.AppendVarint(b, a.Reserve)
		b = binary.AppendVarint(b, a.DateTime)
		b = binary.AppendVarint(b, a.Expires)
		b = binary.AppendVarint(b, a.Seller)
		b = binary.AppendVarint(b, a.Category)
		b = appendString(b, a.Extra)
	case KindBid:
		x := e.Bid
		b = binary.AppendVarint(b, x.Auction)
		b = binary.AppendVarint(b, x.Bidder)
		b = binary.AppendVarint(b, x.Price)
		b = appendString(b, x.Channel)
		b = appendString(b, x.URL)
		b = binary.AppendVarint(b, x.DateTime)
		b = appendString(b, x.Extra)
	default:
		panic(fmt.Sprintf("nexmark: encoding an event of unknown kind %d", e.Kind))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads fields from src, remembering the first error.
type decoder struct {
	src []byte
	n   int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("nexmark event: %w: "+format, append([]any{codec.ErrCorrupt}, args...)...)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	rest := d.src[d.n:]
	x, k := binary.Uvarint(rest)
	switch {
	case k == 0:
		d.fail("truncated varint at byte %d", d.n)
		return 0
	case k < 0:
		d.fail("varint overflows 64 bits at byte %d", d.n)
		return 0
	case k > 1 && rest[k-1] == 0:
		d.fail("over-long varint at byte %d", d.n)
		return 0
	}
	d.n += k
	return x
}

func (d *decoder) int() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *decoder) string() string {
	l := d.uvarint()
	if d.err != nil {
		return ""
	}
	if rem := uint64(len(d.src) - d.n); l > rem {
		d.fail("string of %d bytes exceeds the %d remaining", l, rem)
		return ""
	}
	s := string(d.src[d.n : d.n+int(l)])
	d.n += int(l)
	return s
}

func decodeEvent(src []byte) (Event, int, error) {
	if len(src) == 0 {
		return Event{}, 0, fmt.Errorf("nexmark event: %w: empty input", codec.ErrCorrupt)
	}
	d := decoder{src: src, n: 1}
	var e Event
	switch e.Kind = Kind(src[0]); e.Kind {
	case KindPerson:
		p := &Person{}
		p.ID = d.int()
		p.Name = d.string()
		p.EmailAddress = d.string()
		p.CreditCard = d.string()
		p.City = d.string()
		p.State = d.string()
		p.DateTime = d.int()
		p.Extra = d.string()
		e.Person = p
	case KindAuction:
		a := &Auction{}
		a.ID = d.int()
		a.ItemName = d.string()
		a.Description = d.string()
		a.InitialBid = d.int()
		a.Reserve = d.int()
		a.DateTime = d.int()
		a.Expires = d.int()
		a.Seller = d.int()
		a.Category = d.int()
		a.Extra = d.string()
		e.Auction = a
	case KindBid:
		x := &Bid{}
		x.Auction = d.int()
		x.Bidder = d.int()
		x.Price = d.int()
		x.Channel = d.string()
		x.URL = d.string()
		x.DateTime = d.int()
		x.Extra = d.string()
		e.Bid = x
	default:
		return Event{}, 0, fmt.Errorf("nexmark event: %w: unknown kind %d", codec.ErrCorrupt, src[0])
	}
	if d.err != nil {
		return Event{}, 0, d.err
	}
	return e, d.n, nil
}

// PersonCodec encodes a Person for network edges and state, as EventCodec
// encodes a person event.
func PersonCodec() codec.Codec[Person] { return personCodec }

var personCodec = codec.Func(func(b []byte, p Person) []byte {
	return appendEvent(b, Event{Kind: KindPerson, Person: &p})
}, func(src []byte) (Person, int, error) {
	e, n, err := decodeEvent(src)
	if err == nil && e.Kind != KindPerson {
		err = fmt.Errorf("nexmark person: %w: event of kind %d", codec.ErrCorrupt, e.Kind)
	}
	if err != nil {
		return Person{}, 0, err
	}
	return *e.Person, n, nil
})

// AuctionCodec encodes an Auction for network edges and state, as
// EventCodec encodes an auction event.
func AuctionCodec() codec.Codec[Auction] { return auctionCodec }

var auctionCodec = codec.Func(func(b []byte, a Auction) []byte {
	return appendEvent(b, Event{Kind: KindAuction, Auction: &a})
}, func(src []byte) (Auction, int, error) {
	e, n, err := decodeEvent(src)
	if err == nil && e.Kind != KindAuction {
		err = fmt.Errorf("nexmark auction: %w: event of kind %d", codec.ErrCorrupt, e.Kind)
	}
	if err != nil {
		return Auction{}, 0, err
	}
	return *e.Auction, n, nil
})
