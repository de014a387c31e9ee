package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/cycled/cycled/tools/sim"
	"github.com/cycled/cycled/tools/sim/advise"
)

// adviseCmd is "cycled advise": proposals for budgets, attempts and cooldowns, from a
// simulation (--sim), from the flight recorder's ticks (--from STATE_DIR) or from a running
// daemon's (--metrics URL), each checked by re-simulation.
func adviseCmd(fs *pflag.FlagSet, stdout, stderr io.Writer) func(args []string) int {
	f := newSimFlags(fs)
	useSim := f.fs.Bool("sim", false, "advise from a simulation of --config (with --scenario, --ticks/--for, --seed)")
	from := f.fs.String("from", "", "advise from the ticks recorded in STATE_DIR/recorder.db, replayed against --config")
	metrics := f.fs.String("metrics", "", "advise from the ticks a running daemon at URL keeps (its address or its /metrics URL), replayed against --config")
	maxEx := f.fs.Float64("max-exhaustion", 0.001, "objective: the share of its ticks in which a tier may exhaust its budget")
	asJSON := f.fs.Bool("json", false, "print the advice as JSON")
	showBest := f.fs.Bool("show-best", false, "when the objective is not met, also print the best configuration found, under its own heading (it is not advice; the exit code stays 3)")
	return func(args []string) int {
		if msg := adviseSource(*useSim, *from, *metrics, *f.scenario, *maxEx); msg != "" {
			fmt.Fprintln(stderr, "cycled advise: "+msg)
			return exitUsage
		}
		o, code, ok := f.options("advise", args, stderr)
		if !ok {
			return code
		}
		ctx := context.Background()
		if *from != "" || *metrics != "" {
			if code, ok := observedScenario(ctx, &o, *from, *metrics, stderr); !ok {
				return code
			}
		}
		return adviseRun(ctx, o, *maxEx, *showBest, *asJSON, stdout, stderr)
	}
}

// adviseRun advises on o and prints the advice; exit 3 when the objective is not met.
func adviseRun(ctx context.Context, o sim.Options, maxEx float64, showBest, asJSON bool, stdout, stderr io.Writer) int {
	a, err := advise.Advise(ctx, o, advise.Objective{MaxExhaustion: maxEx})
	if err == nil && !showBest {
		a.DropBestFound()
	}
	if err == nil {
		if asJSON {
			err = a.WriteJSON(stdout)
		} else {
			err = a.WriteText(stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "cycled advise:", err)
		return exitError
	}
	if !a.Met {
		fmt.Fprintln(stderr, "cycled advise: objective not met: nothing is advised")
		return exitUnmet
	}
	return exitOK
}

// observedScenario reads the ticks of the recorder in from, or of the daemon at url, and
// makes o's scenario replay them against o's configuration.
func observedScenario(ctx context.Context, o *sim.Options, from, url string, stderr io.Writer) (int, bool) {
	flag, src := "--from", from
	read := func() (*advise.Observed, error) { return advise.FromRecorder(ctx, from) }
	if url != "" {
		flag, src = "--metrics", url
		read = func() (*advise.Observed, error) { return advise.FromDaemon(ctx, url) }
	}
	ob, err := read()
	if err != nil {
		fmt.Fprintf(stderr, "cycled advise: %s: %v\n", flag, err)
		return exitError, false
	}
	sc := ob.Scenario("observed in " + src)
	if err := sc.Check(o.Config); err != nil {
		printProblems(stderr, "cycled advise: "+flag+" "+src+": the observed modules do not fit --config", err)
		return exitError, false
	}
	o.Scenario = sc
	if o.Ticks == 0 && o.For == 0 {
		o.Ticks = max(ob.Ticks, 1)
	}
	return 0, true
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
	case !(maxEx > 0 && maxEx < 1):
		return "--max-exhaustion: must be in (0, 1)"
	case (from != "" || metrics != "") && scenario != "":
		return "--scenario: the observed ticks are the scenario of --from and --metrics; give one of them"
	}
	return ""
}
