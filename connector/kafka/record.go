package kafka

import "time"

// Record is a consumed Kafka record handed to the source's deserializer.
// The deserializer may keep its byte slices (Key, Value, header values):
// each record has its own. It must not keep the *Record or its Headers
// slice: the source reuses them for the next record (no allocation per
// record).
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	// Timestamp is the record's timestamp (create or log-append time, as
	// the topic says).
	Timestamp time.Time
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}
