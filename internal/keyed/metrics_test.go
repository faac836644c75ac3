package keyed

import (
	"testing"
	"time"

	"github.com/weirstream/weir/internal/metrics"
)

func TestMetricsRegister(t *testing.T) {
	m := &Metrics{}
	g := metrics.NewRegistry().Group(metrics.ScopeTaskManagerJob)
	m.Register(g)
	value := func(name string) float64 {
		t.Helper()
		v, ok := g.Get(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		return v.Value()
	}
	if got := value("ChangelogMaterialization.lastDurationOfMaterialization"); got != -1 {
		t.Fatalf("duration before the first materialization %v, want -1", got)
	}
	m.started.Add(2)
	m.completed.Add(1)
	m.lastDuration.Store(int64(1500 * time.Millisecond))
	m.uploads.Add(4)
	m.uploadBytes.Add(4096)
	m.latencySum.Add(int64(8 * time.Millisecond))
	m.sizes.Store(&checkpointSizes{fullMat: 10, incMat: 3, fullNonMat: 7, incNonMat: 2})
	for name, want := range map[string]float64{
		"ChangelogMaterialization.startedMaterialization":        2,
		"ChangelogMaterialization.completedMaterialization":      1,
		"ChangelogMaterialization.lastDurationOfMaterialization": 1500,
		"ChangelogStorage.numberOfUploadRequests":                4,
		"ChangelogStorage.uploadedBytes":                         4096,
		"ChangelogStorage.uploadLatencyMeanNanos":                2e6,
		"ChangelogStateBackend.lastFullSizeOfMaterialization":    10,
		"ChangelogStateBackend.lastIncSizeOfNonMaterialization":  2,
	} {
		if got := value(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}
