package nexmark

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"time"
)

// Constants of the Nexmark model, as the Flink implementation
// (github.com/nexmark/nexmark, nexmark-flink) fixes them.
const (
	// FirstPersonID, FirstAuctionID and FirstCategoryID are the smallest
	// ids; starting above zero helps queries find matches on small runs.
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10
	// NumCategories is how many auction categories there are.
	NumCategories = 5

	// Out of every ProportionTotal consecutive event numbers, the first
	// PersonProportion are people, the next AuctionProportion auctions and
	// the remaining BidProportion bids.
	PersonProportion  = 1
	AuctionProportion = 3
	BidProportion     = 46
	ProportionTotal   = PersonProportion + AuctionProportion + BidProportion

	// personIDLead and auctionIDLead are how many not yet generated person
	// and auction ids a random reference may point to.
	personIDLead  = 10
	auctionIDLead = 10
	// hotGroup is the batch size of the "hot" persons and auctions: a hot
	// reference points to the first id of the batch of hotGroup ids that
	// holds the latest one (the second, for hot bidders).
	hotGroup = 100

	// channelsNumber is the number of non-hot bid channels.
	channelsNumber = 10000
	// hotChannelsRatio: a bid comes from one of the hot channels with
	// probability 1 - 1/hotChannelsRatio.
	hotChannelsRatio = 100
	minStringLength  = 3
)

// Defaults of Config.
const (
	DefaultFirstEventRate      = 10_000_000 // events per second, all subtasks together
	DefaultNumInFlightAuctions = 100
	DefaultNumActivePeople     = 1000
	DefaultHotAuctionRatio     = 2
	DefaultHotSellersRatio     = 4
	DefaultHotBiddersRatio     = 4
	DefaultAvgPersonBytes      = 200
	DefaultAvgAuctionBytes     = 500
	DefaultAvgBidBytes         = 100
)

// DefaultBaseTime is the event time of event 0 unless Config.BaseTime says
// otherwise: 2026-01-01T00:00:00Z in Unix milliseconds.
var DefaultBaseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// Config parameterises the generator. Zero fields take the defaults (see
// WithDefaults).
type Config struct {
	// Events is the total number of events; it must be positive for Source.
	Events int64
	// Seed selects one of many deterministic event streams.
	Seed uint64

	// FirstEventRate is the simulated event rate (events per second, over
	// all subtasks): event i happens at BaseTime + i*1000/FirstEventRate ms.
	FirstEventRate int64
	// NumInFlightAuctions is the average number of auctions open at once;
	// it sets auction lengths and the window of auctions random bids go to.
	NumInFlightAuctions int
	// NumActivePeople is how many of the latest people random sellers and
	// bidders are chosen among.
	NumActivePeople int
	// HotAuctionRatio: a bid goes to the hot auction with probability
	// 1 - 1/HotAuctionRatio. HotSellersRatio and HotBiddersRatio are the
	// same for an auction's seller and a bid's bidder.
	HotAuctionRatio, HotSellersRatio, HotBiddersRatio int
	// AvgPersonBytes, AvgAuctionBytes and AvgBidBytes are the average
	// idealised sizes of the events; the Extra field pads them to it.
	AvgPersonBytes, AvgAuctionBytes, AvgBidBytes int
	// BaseTime is the event time of event 0, Unix ms (default
	// DefaultBaseTime).
	BaseTime int64
}

// WithDefaults returns c with every zero (or negative) knob set to its
// default. Events and Seed are kept.
func (c Config) WithDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.FirstEventRate <= 0 {
		c.FirstEventRate = DefaultFirstEventRate
	}
	def(&c.NumInFlightAuctions, DefaultNumInFlightAuctions)
	def(&c.NumActivePeople, DefaultNumActivePeople)
	def(&c.HotAuctionRatio, DefaultHotAuctionRatio)
	def(&c.HotSellersRatio, DefaultHotSellersRatio)
	def(&c.HotBiddersRatio, DefaultHotBiddersRatio)
	def(&c.AvgPersonBytes, DefaultAvgPersonBytes)
	def(&c.AvgAuctionBytes, DefaultAvgAuctionBytes)
	def(&c.AvgBidBytes, DefaultAvgBidBytes)
	if c.BaseTime == 0 {
		c.BaseTime = DefaultBaseTime
	}
	return c
}

// KindOf returns the kind of event number i.
func KindOf(i int64) Kind {
	switch r := i % ProportionTotal; {
	case r < PersonProportion:
		return KindPerson
	case r < PersonProportion+AuctionProportion:
		return KindAuction
	}
	return KindBid
}

// EventTime returns the event time (Unix ms) of event number i: the
// stream advances by 1000/FirstEventRate ms per event, so event times
// never decrease with the event number.
func (c Config) EventTime(i int64) int64 {
	c = c.WithDefaults()
	return c.timestamp(i)
}

func (c *Config) timestamp(i int64) int64 {
	// Flink: baseTime + (long)(i * 1e6/rate) / 1000, which is i*1000/rate
	// rounded down, computed here without floating point.
	hi, lo := bits.Mul64(uint64(i), 1000)
	q, _ := bits.Div64(hi, lo, uint64(c.FirstEventRate))
	return c.BaseTime + int64(q)
}

// LastPersonID is the id of the newest person that exists when event i is
// generated (the person of event i itself, if it is one).
func LastPersonID(i int64) int64 { return lastBase0PersonID(i) + FirstPersonID }

// LastAuctionID is the id of the newest auction that exists when event i
// is generated (the auction of event i itself, if it is one); below
// FirstAuctionID before the first auction.
func LastAuctionID(i int64) int64 { return lastBase0AuctionID(i) + FirstAuctionID }

func lastBase0PersonID(i int64) int64 {
	epoch, off := i/ProportionTotal, i%ProportionTotal
	if off >= PersonProportion {
		off = PersonProportion - 1
	}
	return epoch*PersonProportion + off
}

func lastBase0AuctionID(i int64) int64 {
	epoch, off := i/ProportionTotal, i%ProportionTotal
	switch {
	case off < PersonProportion: // a person: the last auction of the previous epoch
		epoch--
		off = AuctionProportion - 1
	case off >= PersonProportion+AuctionProportion: // a bid
		off = AuctionProportion - 1
	default:
		off -= PersonProportion
	}
	return epoch*AuctionProportion + off
}

// rng is the per-event random number generator: a PCG seeded from the
// generator's seed and the event number (hashed, so that neighbouring
// events get unrelated streams).
type rng struct{ p rand.PCG }

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (r *rng) seed(seed uint64, stream, i uint64) {
	r.p.Seed(splitmix(seed^stream), splitmix(i^splitmix(stream)))
}

// intn returns a uniform int64 in [0, n), n > 0 (Lemire's method).
func (r *rng) intn(n int64) int64 {
	un := uint64(n)
	hi, lo := bits.Mul64(r.p.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.p.Uint64(), un)
		}
	}
	return int64(hi)
}

func (r *rng) float64() float64 { return float64(r.p.Uint64()>>11) / (1 << 53) }

// Streams of the per-event and per-channel generators.
const (
	streamEvent   = 0x6e65786d61726b01
	streamChannel = 0x6e65786d61726b02
)

// nextString returns a random string of lower-case letters and spaces of
// up to maxLen-1 characters (at least minStringLength before trimming),
// without leading or trailing spaces.
func (r *rng) nextString(maxLen int) string {
	n := minStringLength + int(r.intn(int64(maxLen-minStringLength)))
	var buf [128]byte
	b := buf[:0]
	for range n {
		if r.intn(13) == 0 {
			b = append(b, ' ')
		} else {
			b = append(b, byte('a'+r.intn(26)))
		}
	}
	lo, hi := 0, len(b)
	for lo < hi && b[lo] == ' ' {
		lo++
	}
	for hi > lo && b[hi-1] == ' ' {
		hi--
	}
	return string(b[lo:hi])
}

// exactString returns n random lower-case letters.
func (r *rng) exactString(n int) string {
	var buf [512]byte
	var b []byte
	if n <= len(buf) {
		b = buf[:n]
	} else {
		b = make([]byte, n)
	}
	var x uint64
	k := 0
	for j := range b {
		if k == 0 {
			x, k = r.p.Uint64(), 13 // 26^13 < 2^64
		}
		b[j] = byte('a' + x%26)
		x /= 26
		k--
	}
	return string(b)
}

// nextExtra returns padding that brings an event of currentSize bytes to
// avgSize on average: uniform in avgSize-currentSize ± 20%.
func (r *rng) nextExtra(currentSize, avgSize int) string {
	if currentSize > avgSize {
		return ""
	}
	avgSize -= currentSize
	delta := int(math.Round(float64(avgSize) * 0.2))
	size := avgSize - delta
	if delta > 0 {
		size += int(r.intn(int64(2 * delta)))
	}
	return r.exactString(size)
}

// nextPrice returns a price in cents, log-uniform between 1.00 and
// 1,000,000.00.
func (r *rng) nextPrice() int64 {
	return int64(math.Round(math.Pow(10, r.float64()*6) * 100))
}

// nextBase0PersonID returns a random person among the active ones, or
// one of the personIDLead next ones.
func (r *rng) nextBase0PersonID(c *Config, i int64) int64 {
	numPeople := lastBase0PersonID(i) + 1
	active := min(numPeople, int64(c.NumActivePeople))
	return numPeople - active + r.intn(active+personIDLead)
}

// nextBase0AuctionID returns a random auction among the
// NumInFlightAuctions latest ones, or one of the auctionIDLead next ones.
func (r *rng) nextBase0AuctionID(c *Config, i int64) int64 {
	maxA := lastBase0AuctionID(i)
	minA := max(maxA-int64(c.NumInFlightAuctions), 0)
	return minA + r.intn(maxA-minA+1+auctionIDLead)
}

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}

	// HotChannels are the channels almost every bid comes from; the rest
	// come from "channel-N", 0 <= N < 10000.
	HotChannels = []string{"Google", "Facebook", "Baidu", "Apple"}
	hotURLs     = []string{
		"https://www.nexmark.com/goo/e_mk/rix/item.htm?query=1",
		"https://www.nexmark.com/meta/bwu/ux_q/item.htm?query=1",
		"https://www.nexmark.com/bidu/cya/pjd/item.htm?query=1",
		"https://www.nexmark.com/aapl/ti_s/hkw/item.htm?query=1",
	}
)

func pick(r *rng, list []string) string { return list[r.intn(int64(len(list)))] }

// Generate returns event number i (0-based) of the stream c describes. It
// is a pure function of c (with defaults applied), and i: any subtask can
// generate any event, in any order.
func Generate(c Config, i int64) Event {
	c = c.WithDefaults()
	return generate(&c, i)
}

func generate(c *Config, i int64) Event {
	var r rng
	r.seed(c.Seed, streamEvent, uint64(i))
	ts := c.timestamp(i)
	switch KindOf(i) {
	case KindPerson:
		return Event{Kind: KindPerson, Person: nextPerson(c, &r, i, ts)}
	case KindAuction:
		return Event{Kind: KindAuction, Auction: nextAuction(c, &r, i, ts)}
	}
	return Event{Kind: KindBid, Bid: nextBid(c, &r, i, ts)}
}

func nextPerson(c *Config, r *rng, i, ts int64) *Person {
	p := &Person{ID: lastBase0PersonID(i) + FirstPersonID, DateTime: ts}
	p.Name = pick(r, firstNames) + " " + pick(r, lastNames)
	p.EmailAddress = r.nextString(7) + "@" + r.nextString(5) + ".com"
	var cc [19]byte
	for g := range 4 {
		n := r.intn(10000)
		o := g * 5
		if g > 0 {
			cc[o-1] = ' '
		}
		cc[o], cc[o+1], cc[o+2], cc[o+3] = byte('0'+n/1000), byte('0'+n/100%10), byte('0'+n/10%10), byte('0'+n%10)
	}
	p.CreditCard = string(cc[:])
	p.City = pick(r, usCities)
	p.State = pick(r, usStates)
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = r.nextExtra(size, c.AvgPersonBytes)
	return p
}

func nextAuction(c *Config, r *rng, i, ts int64) *Auction {
	a := &Auction{ID: lastBase0AuctionID(i) + FirstAuctionID, DateTime: ts}
	if r.intn(int64(c.HotSellersRatio)) > 0 {
		a.Seller = lastBase0PersonID(i) / hotGroup * hotGroup
	} else {
		a.Seller = r.nextBase0PersonID(c, i)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + r.intn(NumCategories)
	a.InitialBid = r.nextPrice()
	a.Expires = ts + r.auctionLength(c, i, ts)
	a.ItemName = r.nextString(20)
	a.Description = r.nextString(100)
	a.Reserve = a.InitialBid + r.nextPrice()
	size := 8 + len(a.ItemName) + len(a.Description) + 8 + 8 + 8 + 8 + 8
	a.Extra = r.nextExtra(size, c.AvgAuctionBytes)
	return a
}

// auctionLength returns a random auction length (ms), on average the event
// time it takes to generate NumInFlightAuctions more auctions, at least 1.
func (r *rng) auctionLength(c *Config, i, ts int64) int64 {
	eventsForAuctions := int64(c.NumInFlightAuctions) * ProportionTotal / AuctionProportion
	horizon := c.timestamp(i+eventsForAuctions) - ts
	return 1 + r.intn(max(horizon*2, 1))
}

func nextBid(c *Config, r *rng, i, ts int64) *Bid {
	b := &Bid{DateTime: ts}
	if r.intn(int64(c.HotAuctionRatio)) > 0 {
		b.Auction = lastBase0AuctionID(i) / hotGroup * hotGroup
	} else {
		b.Auction = r.nextBase0AuctionID(c, i)
	}
	b.Auction += FirstAuctionID
	if r.intn(int64(c.HotBiddersRatio)) > 0 {
		// The second person of the batch, so that hot bidders and hot
		// sellers differ.
		b.Bidder = lastBase0PersonID(i)/hotGroup*hotGroup + 1
	} else {
		b.Bidder = r.nextBase0PersonID(c, i)
	}
	b.Bidder += FirstPersonID
	b.Price = r.nextPrice()
	if r.intn(hotChannelsRatio) > 0 {
		k := r.intn(int64(len(HotChannels)))
		b.Channel, b.URL = HotChannels[k], hotURLs[k]
	} else {
		n := r.intn(channelsNumber)
		b.Channel, b.URL = "channel-"+strconv.FormatInt(n, 10), channelURL(c.Seed, n)
	}
	b.Extra = r.nextExtra(8+8+8+8, c.AvgBidBytes)
	return b
}

// channelURL returns the URL of non-hot channel n: the same for every bid
// of the channel (for a seed), a path of three random directories (as the
// Nexmark generator's base URL), and in 9 cases of 10 a channel_id
// parameter, the absolute value of the channel number's 32 bits reversed
// as a signed int (Java's Math.abs(Integer.reverse(n)), which leaves
// Integer.MIN_VALUE negative).
func channelURL(seed uint64, n int64) string {
	var r rng
	r.seed(seed, streamChannel, uint64(n))
	url := "https://www.nexmark.com/" + r.urlPart() + "/" + r.urlPart() + "/" + r.urlPart() + "/item.htm?query=1"
	if r.intn(10) != 9 {
		id := int32(bits.Reverse32(uint32(n)))
		if id < 0 {
			id = -id // MinInt32 stays negative, as in Java
		}
		url += "&channel_id=" + strconv.FormatInt(int64(id), 10)
	}
	return url
}

// urlPart returns a URL directory of 3 to 4 letters, some of them '_' (the
// Nexmark generator's nextString with '_' as its special character).
func (r *rng) urlPart() string {
	n := minStringLength + int(r.intn(int64(5-minStringLength)))
	var buf [8]byte
	b := buf[:0]
	for range n {
		if r.intn(13) == 0 {
			b = append(b, '_')
		} else {
			b = append(b, byte('a'+r.intn(26)))
		}
	}
	return string(b)
}
