package nexmark_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/nexmark"
)

func TestEventCodecRoundTrip(t *testing.T) {
	cd := nexmark.EventCodec()
	c := nexmark.Config{Seed: 5}
	events := []nexmark.Event{
		{Kind: nexmark.KindPerson, Person: &nexmark.Person{ID: -1, DateTime: -1 << 62}},
		{Kind: nexmark.KindAuction, Auction: &nexmark.Auction{ID: 1 << 62, Extra: "é\x00"}},
		{Kind: nexmark.KindBid, Bid: &nexmark.Bid{Price: -7}},
	}
	for i := range int64(2000) {
		events = append(events, nexmark.Generate(c, i))
	}
	var buf []byte
	for _, e := range events {
		buf = cd.Append(buf, e)
	}
	for k, want := range events {
		got, n, err := cd.Decode(buf)
		if err != nil {
			t.Fatalf("event %d: %v", k, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("event %d: decoded %+v, want %+v", k, got, want)
		}
		buf = buf[n:]
	}
	if len(buf) != 0 {
		t.Fatalf("%d bytes left over", len(buf))
	}
}

func TestEventCodecCorrupt(t *testing.T) {
	cd := nexmark.EventCodec()
	c := nexmark.Config{Seed: 5}
	for i := range int64(4) { // a person, three auctions
		enc := cd.Append(nil, nexmark.Generate(c, i))
		for cut := range len(enc) {
			if _, _, err := cd.Decode(enc[:cut]); !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("event %d truncated to %d of %d bytes: err %v", i, cut, len(enc), err)
			}
		}
	}
	enc := cd.Append(nil, nexmark.Generate(c, 10)) // a bid
	bad := [][]byte{
		{3},             // unknown kind
		{255, 0},        // unknown kind
		{2, 0x80, 0x00}, // over-long varint
		append([]byte{2}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), // overflow
		{2, 2, 2, 2, 100, 'a'}, // string longer than the input
	}
	for _, b := range bad {
		if _, _, err := cd.Decode(b); !errors.Is(err, codec.ErrCorrupt) {
			t.Errorf("decode %v: err %v, want ErrCorrupt", b, err)
		}
	}
	if _, n, err := cd.Decode(append(enc, 1, 2, 3)); err != nil || n != len(enc) {
		t.Errorf("decode with trailing bytes: n %d of %d, err %v", n, len(enc), err)
	}
}

func TestPersonAndAuctionCodecs(t *testing.T) {
	c := nexmark.Config{Seed: 5}
	pc, ac := nexmark.PersonCodec(), nexmark.AuctionCodec()
	for i := range int64(200) {
		switch e := nexmark.Generate(c, i); e.Kind {
		case nexmark.KindPerson:
			enc := pc.Append([]byte("x"), *e.Person)[1:]
			if got, n, err := pc.Decode(enc); err != nil || n != len(enc) || got != *e.Person {
				t.Fatalf("person %d: decoded %+v (%d of %d bytes, %v), want %+v", i, got, n, len(enc), err, *e.Person)
			}
			if _, _, err := ac.Decode(enc); !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("a person decoded as an auction: err %v", err)
			}
		case nexmark.KindAuction:
			enc := ac.Append(nil, *e.Auction)
			if got, n, err := ac.Decode(enc); err != nil || n != len(enc) || got != *e.Auction {
				t.Fatalf("auction %d: decoded %+v (%d of %d bytes, %v), want %+v", i, got, n, len(enc), err, *e.Auction)
			}
		}
	}
}
