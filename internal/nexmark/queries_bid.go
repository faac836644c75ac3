package nexmark

import (
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir"
)

// The stateless bid queries: a projection and filter of each bid (SELECT
// ... FROM bid WHERE ...), chained to the source.

// selectBids applies sel to every bid of events: the rows it accepts are
// the result (one FlatMap, named name).
func selectBids[T any](events *weir.DataStream[Event], name string, sel func(b *Bid) (T, bool)) *weir.DataStream[T] {
	return weir.FlatMap(events, func(e Event, out weir.Collector[T]) {
		if e.Kind != KindBid {
			return
		}
		if r, ok := sel(e.Bid); ok {
			out.Collect(r)
		}
	}).Name(name)
}

// Decimal3 is a SQL DECIMAL of scale 3 (Flink's DECIMAL(23, 3)), held
// exactly as a count of thousandths. It renders as a decimal number with
// three fractional digits, in JSON too.
type Decimal3 int64

// String renders d as a decimal, e.g. "908.000".
func (d Decimal3) String() string {
	return string(d.appendTo(nil))
}

// MarshalJSON renders d as a JSON number with three fractional digits.
func (d Decimal3) MarshalJSON() ([]byte, error) { return d.appendTo(nil), nil }

func (d Decimal3) appendTo(b []byte) []byte {
	u := uint64(d)
	if d < 0 {
		b = append(b, '-')
		u = -u
	}
	b = strconv.AppendUint(b, u/1000, 10)
	f := u % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

// DollarToEuro is the exchange rate of q1 and q14, 0.908, in thousandths:
// the SQL multiplies by the DECIMAL literal 0.908, so 0.908 * price is
// exactly price * DollarToEuro thousandths.
const DollarToEuro = 908

func toEuro(price int64) Decimal3 { return Decimal3(price * DollarToEuro) }

// sqlDate is DATE_FORMAT(ts, 'yyyy-MM-dd'). Event times advance slowly
// over days, so the last day formatted is kept (shared by every subtask:
// key selectors run on several goroutines).
func sqlDate(ts int64) string {
	day := ts - mod(ts, 24*time.Hour.Milliseconds())
	if d := lastDate.Load(); d != nil && d.day == day {
		return d.s
	}
	s := time.UnixMilli(ts).UTC().Format("2006-01-02")
	lastDate.Store(&formattedDay{day: day, s: s})
	return s
}

// formattedDay is a day (its first Unix millisecond) and its sqlDate.
type formattedDay struct {
	day int64
	s   string
}

var lastDate atomic.Pointer[formattedDay]

// sqlHourMinute is DATE_FORMAT(ts, 'HH:mm').
func sqlHourMinute(ts int64) string { return time.UnixMilli(ts).UTC().Format("15:04") }

// sqlHour is HOUR(ts).
func sqlHour(ts int64) int64 { return mod(ts, 24*time.Hour.Milliseconds()) / time.Hour.Milliseconds() }

// PassThroughBid is q0's result row.
type PassThroughBid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

// Q0 is the pass-through query:
//
//	SELECT auction, bidder, price, dateTime, extra FROM bid
func Q0(events *weir.DataStream[Event]) *weir.DataStream[PassThroughBid] {
	return selectBids(events, "Q0", func(b *Bid) (PassThroughBid, bool) {
		return PassThroughBid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}, true
	})
}

// EuroBid is q1's result row: price is DECIMAL(23, 3).
type EuroBid struct {
	Auction  int64    `json:"auction"`
	Bidder   int64    `json:"bidder"`
	Price    Decimal3 `json:"price"`
	DateTime int64    `json:"dateTime"`
	Extra    string   `json:"extra"`
}

// Q1 converts every bid's price from dollars to euros:
//
//	SELECT auction, bidder, 0.908 * price AS price, dateTime, extra FROM bid
//
// 0.908 is a DECIMAL literal in Flink SQL, so the price is exact decimal
// arithmetic (Decimal3), not a rounded DOUBLE or an integer division.
func Q1(events *weir.DataStream[Event]) *weir.DataStream[EuroBid] {
	return selectBids(events, "Q1", func(b *Bid) (EuroBid, bool) {
		return EuroBid{Auction: b.Auction, Bidder: b.Bidder, Price: toEuro(b.Price), DateTime: b.DateTime, Extra: b.Extra}, true
	})
}

// AuctionPrice is q2's result row.
type AuctionPrice struct {
	Auction int64 `json:"auction"`
	Price   int64 `json:"price"`
}

// Q2 selects the bids on every 123rd auction:
//
//	SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0
func Q2(events *weir.DataStream[Event]) *weir.DataStream[AuctionPrice] {
	return selectBids(events, "Q2", func(b *Bid) (AuctionPrice, bool) {
		return AuctionPrice{Auction: b.Auction, Price: b.Price}, b.Auction%123 == 0
	})
}

// SideInputRows is the number of rows of q13's side table.
const SideInputRows = 10_000

// SideInput returns q13's side table: the value of key k, 0 <= k <
// SideInputRows, is k in decimal. That is what the Nexmark side input
// generator writes to the file Flink reads (pairs of a number and its
// string), built here in memory instead.
func SideInput() []string {
	t := make([]string, SideInputRows)
	for k := range t {
		t[k] = strconv.Itoa(k)
	}
	return t
}

// EnrichedBid is q13's result row.
type EnrichedBid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	DateTime int64  `json:"dateTime"`
	Value    string `json:"value"`
}

// Q13 joins every bid with the bounded side table:
//
//	SELECT B.auction, B.bidder, B.price, B.dateTime, S.value
//	FROM (SELECT *, PROCTIME() AS p_time FROM bid) B
//	JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S
//	ON mod(B.auction, 10000) = S.key
//
// Flink looks the key up in a CSV file (side_input.txt); here the table
// (SideInput) is generated in memory when the query is declared and shared
// read-only by the subtasks. It never changes, so the processing-time
// version of the lookup is the one table. An inner join: a bid without a
// row (a negative auction, whose MOD is negative as in Java) is dropped.
func Q13(events *weir.DataStream[Event]) *weir.DataStream[EnrichedBid] {
	side := SideInput()
	return selectBids(events, "Q13", func(b *Bid) (EnrichedBid, bool) {
		k := b.Auction % SideInputRows
		if k < 0 || k >= int64(len(side)) {
			return EnrichedBid{}, false
		}
		return EnrichedBid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Value: side[k]}, true
	})
}

// ClassifiedBid is q14's result row.
type ClassifiedBid struct {
	Auction     int64    `json:"auction"`
	Bidder      int64    `json:"bidder"`
	Price       Decimal3 `json:"price"`
	BidTimeType string   `json:"bidTimeType"`
	DateTime    int64    `json:"dateTime"`
	Extra       string   `json:"extra"`
	CCounts     int64    `json:"c_counts"`
}

// Q14 converts prices, classifies the bid time and counts a character with
// the count_char UDF:
//
//	SELECT auction, bidder, 0.908 * price AS price,
//	  CASE WHEN HOUR(dateTime) >= 8 AND HOUR(dateTime) <= 18 THEN 'dayTime'
//	       WHEN HOUR(dateTime) <= 6 OR HOUR(dateTime) >= 20 THEN 'nightTime'
//	       ELSE 'otherTime' END AS bidTimeType,
//	  dateTime, extra, count_char(extra, 'c') AS c_counts
//	FROM bid WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000
//
// The arithmetic is exact (see Q1); count_char counts the bytes of extra
// equal to the first byte of its second argument, as the UDF does.
func Q14(events *weir.DataStream[Event]) *weir.DataStream[ClassifiedBid] {
	const lo, hi = 1_000_000 * 1000, 50_000_000 * 1000 // in thousandths
	return selectBids(events, "Q14", func(b *Bid) (ClassifiedBid, bool) {
		p := toEuro(b.Price)
		if p <= lo || p >= hi {
			return ClassifiedBid{}, false
		}
		return ClassifiedBid{Auction: b.Auction, Bidder: b.Bidder, Price: p, BidTimeType: bidTimeType(b.DateTime),
			DateTime: b.DateTime, Extra: b.Extra, CCounts: countChar(b.Extra, "c")}, true
	})
}

// bidTimeType is q14's CASE over the hour of the day.
func bidTimeType(ts int64) string {
	switch h := sqlHour(ts); {
	case h >= 8 && h <= 18:
		return "dayTime"
	case h <= 6 || h >= 20:
		return "nightTime"
	}
	return "otherTime"
}

// countChar is Nexmark's count_char UDF: how many bytes of s equal the
// first byte of chr.
func countChar(s, chr string) int64 { return int64(strings.Count(s, chr[:1])) }

// ChannelBid is q21's result row.
type ChannelBid struct {
	Auction   int64  `json:"auction"`
	Bidder    int64  `json:"bidder"`
	Price     int64  `json:"price"`
	Channel   string `json:"channel"`
	ChannelID string `json:"channel_id"`
}

// channelIDPattern is q21's REGEXP_EXTRACT pattern; its group 2 is the id.
var channelIDPattern = regexp.MustCompile(`(&|^)channel_id=([^&]*)`)

// Q21 adds a channel id to the bids:
//
//	SELECT auction, bidder, price, channel,
//	  CASE WHEN lower(channel) = 'apple' THEN '0'
//	       WHEN lower(channel) = 'google' THEN '1'
//	       WHEN lower(channel) = 'facebook' THEN '2'
//	       WHEN lower(channel) = 'baidu' THEN '3'
//	       ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) END AS channel_id
//	FROM bid
//	WHERE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) IS NOT NULL
//	   OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')
//
// The WHERE clause is evaluated with the channel test first, which gives
// the same rows and skips the regular expression for the named channels;
// REGEXP_EXTRACT is the first match, NULL without one.
func Q21(events *weir.DataStream[Event]) *weir.DataStream[ChannelBid] {
	return selectBids(events, "Q21", func(b *Bid) (ChannelBid, bool) {
		id, ok := namedChannelID(b.Channel)
		if !ok {
			m := channelIDPattern.FindStringSubmatch(b.URL)
			if m == nil {
				return ChannelBid{}, false
			}
			id = m[2]
		}
		return ChannelBid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, ChannelID: id}, true
	})
}

// namedChannelID is the id q21's CASE gives the four named channels.
func namedChannelID(channel string) (string, bool) {
	switch strings.ToLower(channel) {
	case "apple":
		return "0", true
	case "google":
		return "1", true
	case "facebook":
		return "2", true
	case "baidu":
		return "3", true
	}
	return "", false
}

// URLDirs is q22's result row; a nil directory is NULL.
type URLDirs struct {
	Auction int64   `json:"auction"`
	Bidder  int64   `json:"bidder"`
	Price   int64   `json:"price"`
	Channel string  `json:"channel"`
	Dir1    *string `json:"dir1"`
	Dir2    *string `json:"dir2"`
	Dir3    *string `json:"dir3"`
}

// Q22 splits the bid URLs into directories:
//
//	SELECT auction, bidder, price, channel,
//	  SPLIT_INDEX(url, '/', 3) AS dir1,
//	  SPLIT_INDEX(url, '/', 4) AS dir2,
//	  SPLIT_INDEX(url, '/', 5) AS dir3 FROM bid
//
// SPLIT_INDEX is Flink's: fields are 0-based and empty fields count
// ("https://host/a" splits into "https:", "", "host", "a"), a field past
// the last is NULL. URLs have three directories, as Flink's generator
// makes them (https://www.nexmark.com/d1/d2/d3/item.htm?query=1).
func Q22(events *weir.DataStream[Event]) *weir.DataStream[URLDirs] {
	return selectBids(events, "Q22", func(b *Bid) (URLDirs, bool) {
		return URLDirs{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel,
			Dir1: splitIndex(b.URL, "/", 3), Dir2: splitIndex(b.URL, "/", 4), Dir3: splitIndex(b.URL, "/", 5)}, true
	})
}

// splitIndex is Flink's SPLIT_INDEX(s, sep, i): field i (0-based) of s
// split at every sep, empty fields kept; nil (NULL) if there is no field
// i. The empty string has no fields.
func splitIndex(s, sep string, i int) *string {
	if i < 0 || s == "" {
		return nil
	}
	for ; i > 0; i-- {
		k := strings.Index(s, sep)
		if k < 0 {
			return nil
		}
		s = s[k+len(sep):]
	}
	if k := strings.Index(s, sep); k >= 0 {
		s = s[:k]
	}
	return &s
}
