package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cycled/cycled/tiers"
)

// Dist is a latency distribution. Exactly one of its fields is set.
type Dist struct {
	// Fixed is a constant latency.
	Fixed *time.Duration `yaml:"fixed"`
	// Uniform is [min, max]: every latency in between equally likely.
	Uniform []time.Duration `yaml:"uniform"`
	// Normal is a normal distribution (clamped at zero).
	Normal *Normal `yaml:"normal"`
	// LogNormal is a log-normal distribution: long right tail, as remote calls have.
	LogNormal *LogNormal `yaml:"lognormal"`
	// Empirical is a histogram: each bucket's weight is the share of latencies up to its
	// bound (and above the bound before it), drawn uniformly within the bucket.
	Empirical []Bucket `yaml:"empirical"`
}

// Normal is a normal distribution of latencies.
type Normal struct {
	// Mean is the distribution's mean.
	Mean time.Duration `yaml:"mean"`
	// StdDev is its standard deviation.
	StdDev time.Duration `yaml:"stddev"`
}

// LogNormal is a log-normal distribution of latencies.
type LogNormal struct {
	// Median is the distribution's median (exp of the mean of its logarithm).
	Median time.Duration `yaml:"median"`
	// Sigma is the standard deviation of its logarithm.
	Sigma float64 `yaml:"sigma"`
}

// Bucket is one bucket of an empirical histogram.
type Bucket struct {
	// LE is the bucket's upper bound (inclusive).
	LE time.Duration `yaml:"le"`
	// Weight is the bucket's relative share of latencies.
	Weight float64 `yaml:"weight"`
}

// maxLatency bounds every latency a distribution gives, so that a long tail cannot stall
// a simulation for virtual years.
const maxLatency = time.Hour

// check returns the problems of d under path p.
func (d *Dist) check(p string) tiers.Problems {
	var ps tiers.Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, tiers.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	n := 0
	if d.Fixed != nil {
		n++
		if *d.Fixed < 0 {
			add(p+".fixed", "must be >= 0")
		}
	}
	if d.Uniform != nil {
		n++
		if len(d.Uniform) != 2 || d.Uniform[0] < 0 || d.Uniform[0] > d.Uniform[1] {
			add(p+".uniform", "must be [min, max] with 0 <= min <= max")
		}
	}
	if d.Normal != nil {
		n++
		if d.Normal.Mean < 0 || d.Normal.StdDev < 0 {
			add(p+".normal", "mean and stddev must be >= 0")
		}
	}
	if d.LogNormal != nil {
		n++
		if d.LogNormal.Median <= 0 || d.LogNormal.Sigma < 0 {
			add(p+".lognormal", "median must be > 0 and sigma >= 0")
		}
	}
	if d.Empirical != nil {
		n++
		ps = append(ps, checkBuckets(p+".empirical", d.Empirical)...)
	}
	if n != 1 {
		add(p, "give exactly one of fixed, uniform, normal, lognormal, empirical (got %d)", n)
	}
	return ps
}

func checkBuckets(p string, bs []Bucket) tiers.Problems {
	var ps tiers.Problems
	total := 0.0
	for i, b := range bs {
		switch {
		case b.LE < 0:
			ps = append(ps, tiers.Problem{Path: fmt.Sprintf("%s[%d].le", p, i), Message: "must be >= 0"})
		case i > 0 && b.LE <= bs[i-1].LE:
			ps = append(ps, tiers.Problem{Path: fmt.Sprintf("%s[%d].le", p, i), Message: "bounds must increase"})
		}
		if b.Weight < 0 || math.IsNaN(b.Weight) || math.IsInf(b.Weight, 0) {
			ps = append(ps, tiers.Problem{Path: fmt.Sprintf("%s[%d].weight", p, i), Message: "must be a finite number >= 0"})
		}
		total += b.Weight
	}
	if len(ps) == 0 && !(total > 0) {
		ps = append(ps, tiers.Problem{Path: p, Message: "needs at least one bucket with a weight > 0"})
	}
	return ps
}

// sample draws one latency from d with r.
func (d *Dist) sample(r *rand.Rand) time.Duration {
	var v float64
	switch {
	case d.Fixed != nil:
		return *d.Fixed
	case d.Uniform != nil:
		v = float64(d.Uniform[0]) + r.Float64()*float64(d.Uniform[1]-d.Uniform[0])
	case d.Normal != nil:
		v = float64(d.Normal.Mean) + r.NormFloat64()*float64(d.Normal.StdDev)
	case d.LogNormal != nil:
		v = float64(d.LogNormal.Median) * math.Exp(d.LogNormal.Sigma*r.NormFloat64())
	default:
		v = sampleBuckets(d.Empirical, r)
	}
	return time.Duration(min(max(v, 0), float64(maxLatency)))
}

func sampleBuckets(bs []Bucket, r *rand.Rand) float64 {
	total := 0.0
	for _, b := range bs {
		total += b.Weight
	}
	u := r.Float64() * total
	lo := time.Duration(0)
	for _, b := range bs {
		if u < b.Weight {
			return float64(lo) + r.Float64()*float64(b.LE-lo)
		}
		u -= b.Weight
		lo = b.LE
	}
	return float64(bs[len(bs)-1].LE)
}
