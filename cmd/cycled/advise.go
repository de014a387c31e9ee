package main

import (
	"context"
	"fmt"
	"io"

	"github.com/cycled/cycled/sim/advise"
)

// adviseCmd is "cycled advise": proposals for budgets, attempts and cooldowns, from a
// simulation (--sim) or from the flight recorder's ticks (--from STATE_DIR), each checked
// by re-simulation.
func adviseCmd(args []string, stdout, stderr io.Writer) int {
	f := newSimFlags("advise")
	useSim := f.fs.Bool("sim", false, "advise from a simulation of --config (with --scenario, --ticks/--for, --seed)")
	from := f.fs.String("from", "", "advise from the ticks recorded in STATE_DIR/recorder.db, replayed against --config")
	metrics := f.fs.String("metrics", "", "advise from a daemon's Prometheus metrics at URL (not available in this version)")
	maxEx := f.fs.Float64("max-exhaustion", 0.001, "objective: the share of its ticks in which a tier may exhaust its budget")
	asJSON := f.fs.Bool("json", false, "print the advice as JSON")
	if code, stop := parseFlags(f.fs, args, stdout, stderr); stop {
		return code
	}
	if msg := adviseSource(*useSim, *from, *metrics, *f.scenario, *maxEx); msg != "" {
		fmt.Fprintln(stderr, "cycled advise: "+msg)
		return exitUsage
	}
	o, code, ok := f.options(stderr)
	if !ok {
		return code
	}
	ctx := context.Background()
	if *from != "" {
		ob, err := advise.FromRecorder(ctx, *from)
		if err != nil {
			fmt.Fprintln(stderr, "cycled advise: --from:", err)
			return exitError
		}
		sc := ob.Scenario("recorded in " + *from)
		if err := sc.Check(o.Config); err != nil {
			printProblems(stderr, "cycled advise: --from "+*from+": the recorded modules do not fit --config", err)
			return exitError
		}
		o.Scenario = sc
		if o.Ticks == 0 && o.For == 0 {
			o.Ticks = max(ob.Ticks, 1)
		}
	}
	a, err := advise.Advise(ctx, o, advise.Objective{MaxExhaustion: *maxEx})
	if err == nil {
		if *asJSON {
			err = a.WriteJSON(stdout)
		} else {
			err = a.WriteText(stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "cycled advise:", err)
		return exitError
	}
	return exitOK
}

// adviseSource checks the flags that choose what advise works from; it returns the
// problem, or "".
func adviseSource(useSim bool, from, metrics, scenario string, maxEx float64) string {
	n := 0
	for _, set := range []bool{useSim, from != "", metrics != ""} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return "give exactly one of --sim, --from STATE_DIR, --metrics URL"
	case metrics != "":
		return "--metrics: not available in this version; use --from STATE_DIR with the recorder enabled, or --sim"
	case !(maxEx > 0 && maxEx < 1):
		return "--max-exhaustion: must be in (0, 1)"
	case from != "" && scenario != "":
		return "--scenario: the recorded ticks are the scenario of --from; give one of them"
	}
	return ""
}
