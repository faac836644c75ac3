package nexmark_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/weirstream/weir/internal/nexmark"
)

// flinkEvent is a row of Flink's Nexmark table, with its column names.
type flinkEvent struct {
	EventType int `json:"event_type"`
	Person    *struct {
		ID           int64  `json:"id"`
		Name         string `json:"name"`
		EmailAddress string `json:"emailAddress"`
		CreditCard   string `json:"creditCard"`
		City         string `json:"city"`
		State        string `json:"state"`
		DateTime     int64  `json:"dateTime"`
		Extra        string `json:"extra"`
	} `json:"person"`
	Auction *struct {
		ID          int64  `json:"id"`
		ItemName    string `json:"itemName"`
		Description string `json:"description"`
		InitialBid  int64  `json:"initialBid"`
		Reserve     int64  `json:"reserve"`
		DateTime    int64  `json:"dateTime"`
		Expires     int64  `json:"expires"`
		Seller      int64  `json:"seller"`
		Category    int64  `json:"category"`
		Extra       string `json:"extra"`
	} `json:"auction"`
	Bid *struct {
		Auction  int64  `json:"auction"`
		Bidder   int64  `json:"bidder"`
		Price    int64  `json:"price"`
		Channel  string `json:"channel"`
		URL      string `json:"url"`
		DateTime int64  `json:"dateTime"`
		Extra    string `json:"extra"`
	} `json:"bid"`
}

// back converts a decoded row to an Event.
func (f flinkEvent) back() nexmark.Event {
	e := nexmark.Event{Kind: nexmark.Kind(f.EventType)}
	if p := f.Person; p != nil {
		e.Person = &nexmark.Person{ID: p.ID, Name: p.Name, EmailAddress: p.EmailAddress, CreditCard: p.CreditCard,
			City: p.City, State: p.State, DateTime: p.DateTime, Extra: p.Extra}
	}
	if a := f.Auction; a != nil {
		e.Auction = &nexmark.Auction{ID: a.ID, ItemName: a.ItemName, Description: a.Description, InitialBid: a.InitialBid,
			Reserve: a.Reserve, DateTime: a.DateTime, Expires: a.Expires, Seller: a.Seller, Category: a.Category, Extra: a.Extra}
	}
	if b := f.Bid; b != nil {
		e.Bid = &nexmark.Bid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, URL: b.URL,
			DateTime: b.DateTime, Extra: b.Extra}
	}
	return e
}

func equalEvents(a, b nexmark.Event) bool {
	if a.Kind != b.Kind || (a.Person == nil) != (b.Person == nil) || (a.Auction == nil) != (b.Auction == nil) || (a.Bid == nil) != (b.Bid == nil) {
		return false
	}
	return (a.Person == nil || *a.Person == *b.Person) && (a.Auction == nil || *a.Auction == *b.Auction) && (a.Bid == nil || *a.Bid == *b.Bid)
}

// Generated events go through the JSON form and back through
// encoding/json unchanged, with Flink's column names and exactly one of
// the three objects set.
func TestEventJSONRoundTrip(t *testing.T) {
	c := nexmark.Config{Events: 2000, Seed: 7}
	for i := range int64(2000) {
		e := nexmark.Generate(c, i)
		line := nexmark.AppendEventJSON(nil, e)
		var f flinkEvent
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("event %d: %v\n%s", i, err, line)
		}
		if got := f.back(); !equalEvents(got, e) {
			t.Fatalf("event %d: decoded %+v, want %+v\n%s", i, got, e, line)
		}
		var generic map[string]any
		if err := json.Unmarshal(line, &generic); err != nil {
			t.Fatal(err)
		}
		nulls := 0
		for _, k := range []string{"person", "auction", "bid"} {
			if v, ok := generic[k]; !ok {
				t.Fatalf("event %d lacks %q: %s", i, k, line)
			} else if v == nil {
				nulls++
			}
		}
		if nulls != 2 {
			t.Fatalf("event %d: %d null objects, want 2: %s", i, nulls, line)
		}
	}
}

// Strings that need escaping decode to themselves.
func TestEventJSONEscaping(t *testing.T) {
	for _, s := range []string{"plain", `q"uote\back`, "tab\tnl\nctl\x01\x1f", "ünï©ode ✓", "\u2028\u2029", "<&>"} {
		e := nexmark.Event{Kind: nexmark.KindBid, Bid: &nexmark.Bid{Channel: s, URL: s, Extra: s}}
		line := nexmark.AppendEventJSON(nil, e)
		var f flinkEvent
		if err := json.Unmarshal(line, &f); err != nil {
			t.Fatalf("%q: %v\n%s", s, err, line)
		}
		if f.Bid.Channel != s || f.Bid.URL != s || f.Bid.Extra != s {
			t.Errorf("%q decoded as %q", s, f.Bid.Channel)
		}
	}
	var f flinkEvent
	line := nexmark.AppendEventJSON(nil, nexmark.Event{Kind: nexmark.KindBid, Bid: &nexmark.Bid{Extra: "a\xffb"}})
	if err := json.Unmarshal(line, &f); err != nil || f.Bid.Extra != "a\ufffdb" {
		t.Errorf("invalid UTF-8: %v, %q", err, f.Bid.Extra)
	}
}

// The same Config gives the same bytes, one line per event, in event
// order; another seed gives other bytes.
func TestWriteEventsJSONDeterministic(t *testing.T) {
	write := func(c nexmark.Config) []byte {
		var b bytes.Buffer
		if err := nexmark.WriteEventsJSON(context.Background(), &b, c); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	c := nexmark.Config{Events: 5000, Seed: 3, FirstEventRate: 1000}
	a, b := write(c), write(c)
	if !bytes.Equal(a, b) {
		t.Fatal("two runs with the same config wrote different bytes")
	}
	sc := bufio.NewScanner(bytes.NewReader(a))
	sc.Buffer(nil, 1<<20)
	var n int64
	for sc.Scan() {
		var f flinkEvent
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatal(err)
		}
		if want := nexmark.Generate(c, n); !equalEvents(f.back(), want) {
			t.Fatalf("line %d is not event %d", n, n)
		}
		n++
	}
	if n != 5000 {
		t.Fatalf("%d lines, want 5000", n)
	}
	c.Seed = 4
	if bytes.Equal(write(c), a) {
		t.Error("another seed wrote the same bytes")
	}
	if err := nexmark.WriteEventsJSON(context.Background(), &bytes.Buffer{}, nexmark.Config{}); err == nil {
		t.Error("no error for Events 0")
	}
}

func BenchmarkAppendEventJSON(b *testing.B) {
	c := nexmark.Config{Events: 1 << 20}
	evs := make([]nexmark.Event, 1000)
	for i := range evs {
		evs[i] = nexmark.Generate(c, int64(i))
	}
	var buf []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = nexmark.AppendEventJSON(buf[:0], evs[i%len(evs)])
	}
}
