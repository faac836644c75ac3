package network

import (
	"testing"

	"github.com/weirstream/weir/codec"
)

// A partition counts the records its writers wrote (a broadcast one once)
// and the bytes of the data buffers it sent; a reader counts the records it
// passed on, fragmented ones included.
func TestPartitionAndReaderCount(t *testing.T) {
	rp, rts := newTestPartition(2, 256)
	w := NewRecordWriter(rp, codec.String())
	for i := range 10 {
		w.Emit(i%2, "abc")
	}
	w.Emit(0, string(make([]byte, 700))) // fragmented
	w.Broadcast("xyz")
	rp.BroadcastEvent(Event{Kind: EventEndOfPartition})
	if got := rp.RecordsWritten(); got != 12 {
		t.Fatalf("records written %d, want 12", got)
	}
	var bytes int64
	r := NewRecordReader(codec.String(), Output[string](&sliceOutput[string]{}))
	for _, rt := range rts {
		for _, b := range rt.bufs {
			if b.Kind == KindEvent {
				continue
			}
			bytes += int64(len(b.Data))
			if err := r.Read(0, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rp.BytesSent() != bytes || bytes == 0 {
		t.Fatalf("bytes sent %d, the targets got %d", rp.BytesSent(), bytes)
	}
	if got := r.Records(); got != 13 { // the broadcast record reached both
		t.Fatalf("reader passed on %d records, want 13", got)
	}
}
