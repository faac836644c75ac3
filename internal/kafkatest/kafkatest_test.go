package kafkatest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadCommitted sees committed records only, and every one of them, also
// where transaction markers end a partition.
func TestReadCommittedSkipsAborted(t *testing.T) {
	c := Start(t)
	seeds := c.ListenAddrs()
	CreateTopic(t, seeds, "t", 3)
	Produce(t, seeds, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("plain")})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := Client(t, seeds, kgo.TransactionalID("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, commit := range []bool{true, false, true} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(3) {
			r := &kgo.Record{Topic: "t", Partition: p, Value: []byte(fmt.Sprintf("txn%d-p%d", i, p))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	recs := ReadCommitted(t, seeds, "t")
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	want := []string{"plain", "txn0-p0", "txn2-p0", "txn0-p1", "txn2-p1", "txn0-p2", "txn2-p2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}
