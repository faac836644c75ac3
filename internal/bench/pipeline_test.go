package bench

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/weirstream/weir"
)

func benchmarkPipeline(b *testing.B, edge string, parallelism int) {
	const records = 20_000_000
	opts := weir.Options{Parallelism: parallelism, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var cpu, wall float64
	for b.Loop() {
		r, err := RunPipeline(context.Background(), opts, edge, records)
		if err != nil {
			b.Fatal(err)
		}
		cpu += r.CPUSeconds
		wall += r.WallSeconds
	}
	b.ReportMetric(float64(records)*float64(b.N)/cpu, "records/cpu-s")
	b.ReportMetric(float64(records)*float64(b.N)/wall, "records/s")
	b.ReportMetric(0, "ns/op")
}

func BenchmarkPipelineChained(b *testing.B)     { benchmarkPipeline(b, EdgeChained, 1) }
func BenchmarkPipelineRebalance(b *testing.B)   { benchmarkPipeline(b, EdgeRebalance, 1) }
func BenchmarkPipelineChainedP2(b *testing.B)   { benchmarkPipeline(b, EdgeChained, 2) }
func BenchmarkPipelineRebalanceP2(b *testing.B) { benchmarkPipeline(b, EdgeRebalance, 2) }

func TestRunPipelineCounts(t *testing.T) {
	opts := weir.Options{Parallelism: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, edge := range []string{EdgeChained, EdgeRebalance} {
		r, err := RunPipeline(context.Background(), opts, edge, 100_000)
		if err != nil {
			t.Fatal(err)
		}
		if r.Records != 100_000 || r.WallSeconds <= 0 || r.RecordsPerSecond <= 0 {
			t.Fatalf("%s: implausible result %+v", edge, r)
		}
	}
	if _, err := RunPipeline(context.Background(), opts, "bogus", 10); err == nil {
		t.Fatal("unknown edge accepted")
	}
}
