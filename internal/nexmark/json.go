package nexmark

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// The JSON form of events, as `weir nexmark generate` writes them: one
// object per line, shaped like the table of Flink's Nexmark benchmark
// (nexmark-flink's queries/ddl_gen.sql and ddl_kafka.sql):
//
//	{"event_type":0,"person":{...},"auction":null,"bid":null}
//
// event_type is 0 for a person, 1 for an auction and 2 for a bid; the
// other two objects are null. The objects' fields, in this order:
//
//	person:  id, name, emailAddress, creditCard, city, state, dateTime, extra
//	auction: id, itemName, description, initialBid, reserve, dateTime,
//	         expires, seller, category, extra
//	bid:     auction, bidder, price, channel, url, dateTime, extra
//
// Times (dateTime, expires) are Unix epoch milliseconds, numbers; ids,
// prices and categories are numbers; the rest strings. (Flink's JSON
// format would write TIMESTAMP(3) columns as "yyyy-MM-dd HH:mm:ss.SSS"
// strings; a reader that wants those converts them.)

// AppendEventJSON appends the JSON form of e to dst, without a newline.
// The encoding is a pure function of e, so equal events give equal bytes.
func AppendEventJSON(dst []byte, e Event) []byte {
	dst = append(dst, `{"event_type":`...)
	dst = strconv.AppendInt(dst, int64(e.Kind), 10)
	dst = append(dst, `,"person":`...)
	if p := e.Person; e.Kind == KindPerson && p != nil {
		dst = appendInt(dst, `{"id":`, p.ID)
		dst = appendStr(dst, `,"name":`, p.Name)
		dst = appendStr(dst, `,"emailAddress":`, p.EmailAddress)
		dst = appendStr(dst, `,"creditCard":`, p.CreditCard)
		dst = appendStr(dst, `,"city":`, p.City)
		dst = appendStr(dst, `,"state":`, p.State)
		dst = appendInt(dst, `,"dateTime":`, p.DateTime)
		dst = appendStr(dst, `,"extra":`, p.Extra)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"auction":`...)
	if a := e.Auction; e.Kind == KindAuction && a != nil {
		dst = appendInt(dst, `{"id":`, a.ID)
		dst = appendStr(dst, `,"itemName":`, a.ItemName)
		dst = appendStr(dst, `,"description":`, a.Description)
		dst = appendInt(dst, `,"initialBid":`, a.InitialBid)
		dst = appendInt(dst, `,"reserve":`, a.Reserve)
		dst = appendInt(dst, `,"dateTime":`, a.DateTime)
		dst = appendInt(dst, `,"expires":`, a.Expires)
		dst = appendInt(dst, `,"seller":`, a.Seller)
		dst = appendInt(dst, `,"category":`, a.Category)
		dst = appendStr(dst, `,"extra":`, a.Extra)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"bid":`...)
	if b := e.Bid; e.Kind == KindBid && b != nil {
		dst = appendInt(dst, `{"auction":`, b.Auction)
		dst = appendInt(dst, `,"bidder":`, b.Bidder)
		dst = appendInt(dst, `,"price":`, b.Price)
		dst = appendStr(dst, `,"channel":`, b.Channel)
		dst = appendStr(dst, `,"url":`, b.URL)
		dst = appendInt(dst, `,"dateTime":`, b.DateTime)
		dst = appendStr(dst, `,"extra":`, b.Extra)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

func appendInt(dst []byte, key string, v int64) []byte {
	return strconv.AppendInt(append(dst, key...), v, 10)
}

func appendStr(dst []byte, key, s string) []byte {
	return appendJSONString(append(dst, key...), s)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. It escapes what JSON
// requires (quote, backslash, control characters), U+2028 and U+2029 as
// encoding/json does, and replaces invalid UTF-8 with U+FFFD, so that
// encoding/json decodes it to s wherever s is valid UTF-8.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// WriteEventsJSON writes events 0 to c.Events-1 of the generator c, in
// order, to w as JSON lines (AppendEventJSON). The same Config gives the
// same bytes. It checks ctx between batches of events and returns its
// error if it was cancelled.
func WriteEventsJSON(ctx context.Context, w io.Writer, c Config) error {
	c = c.WithDefaults()
	if c.Events <= 0 {
		return fmt.Errorf("nexmark: Events is %d, must be positive", c.Events)
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	var line []byte
	for i := int64(0); i < c.Events; i++ {
		if i%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line = append(AppendEventJSON(line[:0], generate(&c, i)), '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("nexmark: write events: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("nexmark: write events: %w", err)
	}
	return nil
}
