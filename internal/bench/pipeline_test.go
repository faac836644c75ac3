package bench

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/weirstream/weir"
)

func benchmarkPipeline(b *testing.B, edge string, parallelism int, withMetrics bool) {
	const records = 20_000_000
	opts := weir.Options{Parallelism: parallelism, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var cpu, wall float64
	for b.Loop() {
		r, err := RunPipeline(context.Background(), opts, edge, records, withMetrics)
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

func BenchmarkPipelineChained(b *testing.B)     { benchmarkPipeline(b, EdgeChained, 1, false) }
func BenchmarkPipelineRebalance(b *testing.B)   { benchmarkPipeline(b, EdgeRebalance, 1, false) }
func BenchmarkPipelineChainedP2(b *testing.B)   { benchmarkPipeline(b, EdgeChained, 2, false) }
func BenchmarkPipelineRebalanceP2(b *testing.B) { benchmarkPipeline(b, EdgeRebalance, 2, false) }

// BenchmarkPipelineRebalanceMetrics is BenchmarkPipelineRebalance with the
// tasks' metrics exported and scraped (see RunPipeline).
// The rebalance edge between two task managers over TCP on loopback
// (parallelism 2, one slot each): half the records cross TCP.
func BenchmarkPipelineRebalanceTCP(b *testing.B) {
	const records = 2_000_000
	for range b.N {
		r, err := RunPipelineCluster(context.Background(), weir.Options{Parallelism: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, EdgeRebalance, records, 2)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.RecordsPerSecond, "records/s")
		b.ReportMetric(r.RecordsPerCoreSecond, "records/core-s")
	}
}

func BenchmarkPipelineRebalanceMetrics(b *testing.B) { benchmarkPipeline(b, EdgeRebalance, 1, true) }

func TestRunPipelineCounts(t *testing.T) {
	opts := weir.Options{Parallelism: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, edge := range []string{EdgeChained, EdgeRebalance} {
		for _, withMetrics := range []bool{false, true} {
			r, err := RunPipeline(context.Background(), opts, edge, 100_000, withMetrics)
			if err != nil {
				t.Fatal(err)
			}
			if r.Records != 100_000 || r.WallSeconds <= 0 || r.RecordsPerSecond <= 0 || r.Metrics != withMetrics {
				t.Fatalf("%s: implausible result %+v", edge, r)
			}
		}
	}
	if _, err := RunPipeline(context.Background(), opts, "bogus", 10, false); err == nil {
		t.Fatal("unknown edge accepted")
	}
}

func TestRunPipelineAB(t *testing.T) {
	opts := weir.Options{Parallelism: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r, err := RunPipelineAB(context.Background(), opts, EdgeRebalance, 50_000, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Off) != 3 || len(r.On) != 3 || r.OffMedian <= 0 || r.OnMedian <= 0 || r.Ratio != r.OnMedian/r.OffMedian {
		t.Fatalf("implausible result %+v", r)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("median %v", m)
	}
}

// The pipeline runs to its end on an in-process cluster of two task
// managers over TCP and reports its figures (exactly-once delivery over
// TCP is internal/cluster's tests' claim, not this one's).
func TestRunPipelineClusterCounts(t *testing.T) {
	r, err := RunPipelineCluster(context.Background(), weir.Options{Parallelism: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, EdgeRebalance, 100_000, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.TaskManagers != 2 || r.Records != 100_000 || r.RecordsPerSecond <= 0 || r.CPUSeconds <= 0 {
		t.Fatalf("implausible result %+v", r)
	}
}
