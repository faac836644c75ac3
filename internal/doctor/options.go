package doctor

import "time"

// Options are the thresholds of the rules; docs/doctor.md explains them.
// A zero field takes its default.
type Options struct {
	// SlowFraction: a completed checkpoint is slow when its end-to-end
	// time is at least this share of the interval. Default 0.5: a
	// checkpoint that takes half the interval leaves the job half its time
	// between checkpoints.
	SlowFraction float64
	// TimeoutFraction: a checkpoint is also slow when it takes at least
	// this share of the timeout. Default 0.5.
	TimeoutFraction float64
	// MinSlow: a checkpoint shorter than this is never slow, whatever the
	// interval. Default 50ms.
	MinSlow time.Duration
	// SlowWithoutInterval is the end-to-end time from which a checkpoint
	// is slow when neither the interval nor the timeout are known.
	// Default 10s.
	SlowWithoutInterval time.Duration
	// MinShare: the phase a slow checkpoint is blamed on must account for
	// at least this share of its end-to-end time. Default 0.3. Barriers
	// that wait behind in-flight data on several edges add up: a path of
	// such waits counts as one start delay.
	MinShare float64
	// UpstreamShare: a late barrier is blamed on the synchronous phase of
	// the upstream subtask that sent it when that phase is at least this
	// share of the delay. Default 0.5.
	UpstreamShare float64
	// WarningShare: a phase cause is a warning when at least this share of
	// the completed checkpoints examined show it, and info below. Default
	// 0.5.
	WarningShare float64

	// BusyMsPerSecond, BackPressuredMsPerSecond and PoolUsageHigh are the
	// task metric thresholds of Flink's bottleneck rule: the bottleneck is
	// the first vertex, going downstream, with a subtask busy at least
	// BusyMsPerSecond with inPoolUsage at least PoolUsageHigh, fed by a
	// subtask with outPoolUsage at least PoolUsageHigh or backpressured
	// at least BackPressuredMsPerSecond. Defaults 500 ms/s, 100 ms/s (the
	// end of Flink's "OK" backpressure level) and 0.5.
	BusyMsPerSecond          float64
	BackPressuredMsPerSecond float64
	PoolUsageHigh            float64

	// State growth: the full size grows in at least GrowthStepShare of
	// the steps between GrowthMinCheckpoints or more completed
	// checkpoints, by at least GrowthMinRatio of the first size and at
	// least GrowthMinBytes in all. Defaults 4, 0.75, 0.25 and 64 KiB.
	GrowthMinCheckpoints int
	GrowthStepShare      float64
	GrowthMinRatio       float64
	GrowthMinBytes       int64
}

// withDefaults fills the zero fields.
func (o Options) withDefaults() Options {
	setF := func(p *float64, v float64) {
		if *p <= 0 {
			*p = v
		}
	}
	setF(&o.SlowFraction, 0.5)
	setF(&o.TimeoutFraction, 0.5)
	setF(&o.MinShare, 0.3)
	setF(&o.UpstreamShare, 0.5)
	setF(&o.WarningShare, 0.5)
	setF(&o.BusyMsPerSecond, 500)
	setF(&o.BackPressuredMsPerSecond, 100)
	setF(&o.PoolUsageHigh, 0.5)
	setF(&o.GrowthStepShare, 0.75)
	setF(&o.GrowthMinRatio, 0.25)
	if o.MinSlow <= 0 {
		o.MinSlow = 50 * time.Millisecond
	}
	if o.SlowWithoutInterval <= 0 {
		o.SlowWithoutInterval = 10 * time.Second
	}
	if o.GrowthMinCheckpoints <= 1 {
		o.GrowthMinCheckpoints = 4
	}
	if o.GrowthMinBytes <= 0 {
		o.GrowthMinBytes = 64 << 10
	}
	return o
}
