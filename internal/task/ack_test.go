package task

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/metadata"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// Acknowledgements and declines are plain data: they survive a JSON round
// trip unchanged, as they will have to between a task manager and the job
// manager.
func TestAckIsSerializable(t *testing.T) {
	acks := []Ack{
		{Vertex: 1, Subtask: 2, ID: 7, StartDelay: time.Millisecond, Alignment: 2 * time.Millisecond,
			Sync: 3 * time.Microsecond, Async: time.Second, Bytes: 4096,
			State: []OperatorState{{UID: "count", Name: "Count", Parallelism: 2, MaxParallelism: 128,
				State: metadata.Subtask{Index: 1, KeyGroupStart: 64, KeyGroupEnd: 127,
					Keyed: &storage.FileHandle{Path: "chk-7/op-count-1.kst", Size: 4096},
					Native: &metadata.NativeState{Registry: []byte("{}"), Files: []metadata.NativeFile{
						{Name: "000012.sst", Handle: storage.FileHandle{Path: "shared/op-count-1-r-7-000012.sst", Size: 99}, Shared: true, New: true}}},
					Lists: []metadata.List{{Name: "l", Union: true, Elements: [][]byte{[]byte("x")}}}}}}},
		{Vertex: 0, Subtask: 0, ID: 8, Declined: &Decline{Reason: DeclineAsync, Message: "asynchronous phase of checkpoint 8 failed: disk full"}},
	}
	for _, a := range acks {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("marshal %+v: %v", a, err)
		}
		var got Ack
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Fatalf("round trip changed the ack:\n got %+v\nwant %+v\njson %s", got, a, b)
		}
	}
}
