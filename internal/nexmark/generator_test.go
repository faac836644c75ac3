package nexmark_test

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/nexmark"
)

func genConfig(n int64) nexmark.Config { return nexmark.Config{Events: n, Seed: 42} }

func TestProportions(t *testing.T) {
	const n = 50_000
	c := genConfig(n)
	var counts [3]int
	for i := range int64(n) {
		e := nexmark.Generate(c, i)
		if e.Kind != nexmark.KindOf(i) {
			t.Fatalf("event %d: kind %d, KindOf says %d", i, e.Kind, nexmark.KindOf(i))
		}
		set := 0
		for _, p := range []bool{e.Person != nil, e.Auction != nil, e.Bid != nil} {
			if p {
				set++
			}
		}
		if set != 1 {
			t.Fatalf("event %d: %d payloads set", i, set)
		}
		counts[e.Kind]++
	}
	if want := [3]int{1000, 3000, 46000}; counts != want {
		t.Fatalf("person/auction/bid counts %v, want %v", counts, want)
	}
}

func TestIDsAndReferences(t *testing.T) {
	const n = 200_000
	c := genConfig(n).WithDefaults()
	nextPerson, nextAuction := int64(nexmark.FirstPersonID), int64(nexmark.FirstAuctionID)
	hotAuctions, leadBidders, leadSellers := 0, 0, 0
	for i := range int64(n) {
		e := nexmark.Generate(c, i)
		lastP, lastA := nexmark.LastPersonID(i), nexmark.LastAuctionID(i)
		// A random person reference is among the NumActivePeople newest
		// people or up to 10 ahead of the newest (the spec's "lead").
		personOK := func(id int64) bool {
			return id >= max(nexmark.FirstPersonID, lastP+1-int64(c.NumActivePeople)) && id <= lastP+10
		}
		switch e.Kind {
		case nexmark.KindPerson:
			if e.Person.ID != nextPerson {
				t.Fatalf("event %d: person id %d, want %d", i, e.Person.ID, nextPerson)
			}
			nextPerson++
		case nexmark.KindAuction:
			a := e.Auction
			if a.ID != nextAuction {
				t.Fatalf("event %d: auction id %d, want %d", i, a.ID, nextAuction)
			}
			nextAuction++
			if !personOK(a.Seller) {
				t.Fatalf("event %d: seller %d, newest person %d", i, a.Seller, lastP)
			}
			if a.Seller > lastP {
				leadSellers++
			}
			if a.Category < nexmark.FirstCategoryID || a.Category >= nexmark.FirstCategoryID+nexmark.NumCategories {
				t.Fatalf("event %d: category %d", i, a.Category)
			}
			if a.Expires <= a.DateTime || a.Reserve < a.InitialBid || a.InitialBid < 100 || a.InitialBid > 100_000_000 {
				t.Fatalf("event %d: bad auction %+v", i, a)
			}
		case nexmark.KindBid:
			b := e.Bid
			if b.Auction < max(nexmark.FirstAuctionID, lastA-int64(c.NumInFlightAuctions)) || b.Auction > lastA+10 {
				t.Fatalf("event %d: bid on auction %d, newest auction %d", i, b.Auction, lastA)
			}
			if b.Auction == (lastA-nexmark.FirstAuctionID)/100*100+nexmark.FirstAuctionID {
				hotAuctions++
			}
			if !personOK(b.Bidder) {
				t.Fatalf("event %d: bidder %d, newest person %d", i, b.Bidder, lastP)
			}
			if b.Bidder > lastP {
				leadBidders++
			}
			if b.Price < 100 || b.Price > 100_000_000 {
				t.Fatalf("event %d: price %d", i, b.Price)
			}
		}
	}
	bids := n / 50 * 46
	// HotAuctionRatio 2: at least half the bids go to the hot auction.
	if hotAuctions < bids/2 {
		t.Errorf("%d of %d bids on the hot auction, want at least half", hotAuctions, bids)
	}
	// The spec lets random references point at most 10 ids ahead; that
	// must stay rare.
	if leadBidders > bids/20 || leadSellers > n/50*3/10 {
		t.Errorf("%d bidders and %d sellers not generated yet: too many", leadBidders, leadSellers)
	}
}

func TestGenerateDeterministicAndOrderIndependent(t *testing.T) {
	c := genConfig(5000)
	fwd := make([]nexmark.Event, 5000)
	for i := range fwd {
		fwd[i] = nexmark.Generate(c, int64(i))
	}
	for i := len(fwd) - 1; i >= 0; i -= 7 {
		if got := nexmark.Generate(c, int64(i)); !reflect.DeepEqual(got, fwd[i]) {
			t.Fatalf("event %d differs when generated again", i)
		}
	}
	other := c
	other.Seed++
	same := 0
	for i := range 500 {
		if reflect.DeepEqual(nexmark.Generate(other, int64(i)), fwd[i]) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("%d of 500 events equal under another seed", same)
	}
	// Explicit defaults give the same stream as zero knobs.
	if !reflect.DeepEqual(nexmark.Generate(c.WithDefaults(), 123), fwd[123]) {
		t.Error("WithDefaults changes the stream")
	}
}

func TestEventTime(t *testing.T) {
	c := genConfig(0).WithDefaults()
	if c.BaseTime != nexmark.DefaultBaseTime || nexmark.Generate(c, 0).Timestamp() != nexmark.DefaultBaseTime {
		t.Fatalf("event 0 at %d, want the base time %d", nexmark.Generate(c, 0).Timestamp(), nexmark.DefaultBaseTime)
	}
	prev := int64(0)
	for i := range int64(100_000) {
		ts := nexmark.Generate(c, i).Timestamp()
		if ts < prev {
			t.Fatalf("event %d at %d, before event %d at %d", i, ts, i-1, prev)
		}
		if want := c.BaseTime + i*1000/c.FirstEventRate; ts != want {
			t.Fatalf("event %d at %d, want %d", i, ts, want)
		}
		prev = ts
	}
	// 10M events/s: the 100,000 events span 10 ms.
	if prev-c.BaseTime != 9 {
		t.Fatalf("last event %d ms after base, want 9", prev-c.BaseTime)
	}
	slow := nexmark.Config{FirstEventRate: 1000, BaseTime: 5}
	if got := nexmark.Generate(slow, 2500).Timestamp(); got != 2505 {
		t.Fatalf("at 1000 events/s event 2500 at %d, want 2505", got)
	}
}

var (
	creditCard = regexp.MustCompile(`^\d{4} \d{4} \d{4} \d{4}$`)
	email      = regexp.MustCompile(`^[a-z ]*@[a-z ]*\.com$`)
	lowerText  = regexp.MustCompile(`^([a-z]([a-z ]*[a-z])?)?$`)
	letters    = regexp.MustCompile(`^[a-z]*$`)
	channelN   = regexp.MustCompile(`^channel-(\d+)$`)
	channelURL = regexp.MustCompile(`^https://www\.nexmark\.com/([a-z_]{3,4}/){3}item\.htm\?query=1(&channel_id=-?\d+)?$`)
)

func TestFieldShapes(t *testing.T) {
	c := genConfig(0).WithDefaults()
	var personBytes, auctionBytes, bidBytes, persons, auctions, bids int
	channels := map[string]int{}
	urls := map[string]string{}
	for i := range int64(100_000) {
		e := nexmark.Generate(c, i)
		switch e.Kind {
		case nexmark.KindPerson:
			p := e.Person
			persons++
			if !creditCard.MatchString(p.CreditCard) || !email.MatchString(p.EmailAddress) ||
				!letters.MatchString(p.Extra) || len(strings.Fields(p.Name)) != 2 || p.City == "" || len(p.State) != 2 {
				t.Fatalf("event %d: bad person %+v", i, p)
			}
			personBytes += 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State) + len(p.Extra)
		case nexmark.KindAuction:
			a := e.Auction
			auctions++
			if !lowerText.MatchString(a.ItemName) || len(a.ItemName) > 19 || !lowerText.MatchString(a.Description) ||
				len(a.Description) > 99 || !letters.MatchString(a.Extra) {
				t.Fatalf("event %d: bad auction %+v", i, a)
			}
			auctionBytes += 8 + len(a.ItemName) + len(a.Description) + 40 + len(a.Extra)
		case nexmark.KindBid:
			b := e.Bid
			bids++
			if i := slices.Index(nexmark.HotChannels, b.Channel); i >= 0 {
				channels[b.Channel]++
			} else if m := channelN.FindStringSubmatch(b.Channel); m == nil || len(m[1]) > 4 {
				t.Fatalf("event %d: channel %q", i, b.Channel)
			} else {
				channels["other"]++
			}
			if !channelURL.MatchString(b.URL) {
				t.Fatalf("event %d: url %q", i, b.URL)
			}
			if u, ok := urls[b.Channel]; ok && u != b.URL {
				t.Fatalf("channel %s has urls %q and %q", b.Channel, u, b.URL)
			}
			urls[b.Channel] = b.URL
			if !letters.MatchString(b.Extra) {
				t.Fatalf("event %d: extra %q", i, b.Extra)
			}
			bidBytes += 32 + len(b.Extra)
		}
	}
	for _, ch := range nexmark.HotChannels {
		if channels[ch] < bids/5 {
			t.Errorf("hot channel %s: %d of %d bids", ch, channels[ch], bids)
		}
	}
	if o := channels["other"]; o == 0 || o > bids/50 {
		t.Errorf("%d of %d bids from non-hot channels, want about 1%%", o, bids)
	}
	avg := func(total, n, want int) {
		if got := float64(total) / float64(n); got < float64(want)*0.95 || got > float64(want)*1.05 {
			t.Errorf("average size %.1f, want about %d", got, want)
		}
	}
	avg(personBytes, persons, c.AvgPersonBytes)
	avg(auctionBytes, auctions, c.AvgAuctionBytes)
	avg(bidBytes, bids, c.AvgBidBytes)
}

func BenchmarkGenerate(b *testing.B) {
	c := genConfig(0).WithDefaults()
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		nexmark.Generate(c, i)
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
