// Package nexmark is the Nexmark benchmark for weir: a deterministic,
// parallel, checkpointable generator of an online auction's events
// (people, auctions, bids) after the Nexmark specification as Apache
// Flink's and Beam's implementations realise it, and the benchmark's
// queries written in the weir API.
package nexmark

// Person is a new user of the auction site.
type Person struct {
	ID           int64
	Name         string
	EmailAddress string
	CreditCard   string
	City         string
	State        string
	DateTime     int64 // event time, Unix ms
	Extra        string
}

// Auction is an item put up for auction.
type Auction struct {
	ID          int64
	ItemName    string
	Description string
	InitialBid  int64
	Reserve     int64
	DateTime    int64 // event time, Unix ms
	Expires     int64 // Unix ms
	Seller      int64 // a Person.ID
	Category    int64
	Extra       string
}

// Bid is a bid on an auction.
// The JSON names are the columns of Flink's bid view.
type Bid struct {
	Auction  int64  `json:"auction"` // an Auction.ID
	Bidder   int64  `json:"bidder"`  // a Person.ID
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime int64  `json:"dateTime"` // event time, Unix ms
	Extra    string `json:"extra"`
}

// Kind says which of an Event's fields is set.
type Kind uint8

// Event kinds.
const (
	KindPerson Kind = iota
	KindAuction
	KindBid
)

// Event is one generated event: exactly one of Person, Auction and Bid is
// set, as Kind says.
type Event struct {
	Kind    Kind
	Person  *Person
	Auction *Auction
	Bid     *Bid
}

// Timestamp is the event's event time (Unix ms).
func (e Event) Timestamp() int64 {
	switch e.Kind {
	case KindPerson:
		return e.Person.DateTime
	case KindAuction:
		return e.Auction.DateTime
	}
	return e.Bid.DateTime
}
