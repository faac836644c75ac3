package kafka

import "time"

// TEMP: replaced by record.go from the source branch

// Record is one Kafka record: what the source reads and the sink writes.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}
