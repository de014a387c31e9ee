// Package tsc times short intervals with the processor's time-stamp counter, where the
// kernel keeps its own clock with it. It is the leaf under clock.Stamp: the engine times
// every module it runs, and a plain RDTSC is cheaper than a monotonic clock read, which
// the vDSO orders behind the instructions before it (RDTSCP, or a fence and
// RDTSC). BenchmarkElapsed in BENCHMARKS.md has the figures.
//
// The counter is used only where the kernel trusts it: on Linux on amd64 with the clock
// source "tsc" (the kernel then checked that it is invariant and synchronised across
// CPUs). Elsewhere Sample returns 0 and callers read the clock as before. The clock
// source is read once, at the first Sample: should the kernel later give up on the
// counter (its watchdog finding it unstable), the process keeps timing with it, and a
// counter that stops moving with the clock is caught only by a calibration still to
// come (the last is 10 s after the first).
//
// The counter's rate is calibrated against the monotonic clock, from pairs of readings
// taken by Sample: the first one is the anchor, and a rate is set once 100 ms have passed
// since it, then again at 1 s and 10 s, each time over the whole span. Until the first,
// Sample returns 0. A rate taken against CLOCK_MONOTONIC follows its slewing by NTP at the
// time (at most 500 ppm), so callers re-read the clock now and then rather than chain
// counter intervals for long.
package tsc
