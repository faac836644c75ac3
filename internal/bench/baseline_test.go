package bench

import (
	"encoding/binary"
	"testing"
)

// BenchmarkBaselineHandoff is the floor the runtime is measured against: one
// goroutine encodes int64s into 32 KiB buffers and hands them over a channel
// to another that decodes them, with buffers recycled through a second
// channel. No partitioning, credit, operators or error attribution.
func BenchmarkBaselineHandoff(b *testing.B) {
	const records = 20_000_000
	var cpu float64
	for b.Loop() {
		full := make(chan []byte, 8)
		free := make(chan []byte, 10)
		for range 10 {
			free <- make([]byte, 0, 32<<10)
		}
		done := make(chan int64)
		go func() {
			var sum int64
			for buf := range full {
				for rest := buf; len(rest) >= 8; rest = rest[8:] {
					sum += int64(binary.LittleEndian.Uint64(rest))
				}
				free <- buf[:0]
			}
			done <- sum
		}()
		c0 := ProcessCPU()
		buf := <-free
		for i := range int64(records) {
			if len(buf)+8 > cap(buf) {
				full <- buf
				buf = <-free
			}
			buf = binary.LittleEndian.AppendUint64(buf, uint64(i))
		}
		full <- buf
		close(full)
		<-done
		cpu += (ProcessCPU() - c0).Seconds()
	}
	b.ReportMetric(float64(records)*float64(b.N)/cpu, "records/cpu-s")
	b.ReportMetric(0, "ns/op")
}
