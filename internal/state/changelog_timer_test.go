package state_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/weirstream/weir/internal/state"
)

// Timer records round-trip, and malformed ones are reported as corrupt.
func TestTimerRecord(t *testing.T) {
	for _, r := range []state.TimerRecord{
		{Op: state.TimerRegisterEvent, KeyGroup: 7, Key: []byte("k"), Namespace: []byte("window"), Timestamp: 1234},
		{Op: state.TimerDeleteProcessing, KeyGroup: 0, Key: []byte{}, Timestamp: -1},
	} {
		rec := state.AppendTimerRecord(nil, r)
		if state.IsStateRecord(rec) {
			t.Fatalf("%+v: a timer record must not look like a state record", r)
		}
		got, err := state.ParseTimerRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		if got.Op != r.Op || got.KeyGroup != r.KeyGroup || !bytes.Equal(got.Key, r.Key) ||
			!bytes.Equal(got.Namespace, r.Namespace) || (len(r.Namespace) == 0) != (got.Namespace == nil) || got.Timestamp != r.Timestamp {
			t.Fatalf("round trip of %+v gave %+v", r, got)
		}
		for n := range len(rec) {
			if _, err := state.ParseTimerRecord(rec[:n]); !errors.Is(err, state.ErrCorruptChangelog) {
				t.Fatalf("truncated to %d bytes: err = %v, want state.ErrCorruptChangelog", n, err)
			}
		}
	}
	if _, err := state.ParseTimerRecord([]byte{0x01}); !errors.Is(err, state.ErrCorruptChangelog) {
		t.Fatalf("a state op code parsed as a timer record: %v", err)
	}
}
