package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
	"github.com/cycled/cycled/tools/sim"
)

// simFlags are the flags of "cycled sim" (and of "cycled advise --sim").
type simFlags struct {
	fs       *pflag.FlagSet
	config   *string
	scenario *string
	ticks    *int
	dur      *time.Duration
	seed     *uint64
	start    *string
}

func newSimFlags(fs *pflag.FlagSet) *simFlags {
	return &simFlags{fs: fs,
		config:   fs.String("config", "", "configuration file (YAML); default: the embedded demo"),
		scenario: fs.String("scenario", "", "scenario file (YAML): events at ticks or virtual times"),
		ticks:    fs.Int("ticks", 0, fmt.Sprintf("ticks to simulate (default %d unless --for is given)", sim.DefaultTicks)),
		dur:      fs.Duration("for", 0, "virtual time to simulate, e.g. 10m (instead of --ticks)"),
		seed:     fs.Uint64("seed", 1, "seed of the random streams: same inputs and seed, same output"),
		start:    fs.String("start", "", "virtual start time, RFC 3339 (default "+sim.Epoch.Format(time.RFC3339)+")"),
	}
}

// options checks the flags and loads the configuration and scenario. Every problem is
// printed on stderr with its flag or path; the exit code says what kind.
func (f *simFlags) options(name string, args []string, stderr io.Writer) (sim.Options, int, bool) {
	name = "cycled " + name
	var o sim.Options
	switch {
	case len(args) > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, args[0])
		return o, exitUsage, false
	case *f.ticks < 0:
		fmt.Fprintf(stderr, "%s: --ticks: must be > 0\n", name)
		return o, exitUsage, false
	case *f.dur < 0:
		fmt.Fprintf(stderr, "%s: --for: must be > 0\n", name)
		return o, exitUsage, false
	case *f.ticks > 0 && *f.dur > 0:
		fmt.Fprintf(stderr, "%s: --ticks and --for: give one of them\n", name)
		return o, exitUsage, false
	}
	o.Ticks, o.For, o.Seed = *f.ticks, *f.dur, *f.seed
	if *f.start != "" {
		t, err := time.Parse(time.RFC3339Nano, *f.start)
		if err != nil {
			fmt.Fprintf(stderr, "%s: --start: %q is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)\n", name, *f.start)
			return o, exitUsage, false
		}
		o.Start = t
	}
	cfg, err := loadSimConfig(*f.config)
	if err != nil {
		printProblems(stderr, name+": --config", err)
		return o, exitError, false
	}
	o.Config = cfg
	if *f.scenario != "" {
		sc, err := sim.LoadScenario(*f.scenario)
		if err == nil {
			err = sc.Check(cfg)
		}
		if err != nil {
			printProblems(stderr, name+": --scenario "+*f.scenario, err)
			return o, exitError, false
		}
		o.Scenario = sc
	}
	return o, 0, true
}

func loadSimConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Demo()
	}
	return config.Load(config.WithFile(path), config.WithoutEnv())
}

// printProblems prints err, one problem a line when it has paths.
func printProblems(w io.Writer, prefix string, err error) {
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) {
		fmt.Fprintf(w, "%s: %v\n", prefix, err)
		return
	}
	fmt.Fprintf(w, "%s: %d problem(s)\n", prefix, len(ve.Problems))
	for _, p := range ve.Problems {
		fmt.Fprintln(w, "  "+p.String())
	}
}

// simCmd is "cycled sim": the configuration on virtual time, and its report.
func simCmd(fs *pflag.FlagSet, stdout, stderr io.Writer) func(args []string) int {
	f := newSimFlags(fs)
	out := fs.String("out", "", "write the summaries as JSON lines: DIR (summaries.jsonl, report.txt, report.json) or - (stdout; the report goes to stderr)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	record := fs.String("record", "", "also record the run in DIR/recorder.db, for cycled replay and the dashboard")
	return func(args []string) int {
		o, code, ok := f.options("sim", args, stderr)
		if !ok {
			return code
		}
		return simRun(o, *out, *record, *asJSON, stdout, stderr)
	}
}

// simRun runs o and prints its report (see runSim for out and record).
func simRun(o sim.Options, out, record string, asJSON bool, stdout, stderr io.Writer) int {
	rep, err := runSim(o, out, record, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "cycled sim:", err)
		return exitError
	}
	w := stdout
	if out == "-" {
		w = stderr
	}
	if asJSON {
		err = rep.WriteJSON(w)
	} else {
		err = rep.WriteText(w)
	}
	if err == nil && out != "" && out != "-" {
		err = writeReports(out, rep)
	}
	if err != nil {
		fmt.Fprintln(stderr, "cycled sim:", err)
		return exitError
	}
	return exitOK
}

// runSim runs o, writing the summaries to out (a directory, "-" for stdout, "" nowhere)
// and recording them in record's database if set.
func runSim(o sim.Options, out, record string, stdout io.Writer) (rep *sim.Report, err error) {
	var w io.Writer
	switch out {
	case "":
	case "-":
		w = stdout
	default:
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		fh, err := os.Create(filepath.Join(out, "summaries.jsonl"))
		if err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		defer fh.Close()
		w = fh
	}
	if w != nil {
		flush := bufferSummaries(&o, w)
		defer func() {
			if werr := flush(); werr != nil && err == nil {
				err = fmt.Errorf("--out: %w", werr)
			}
		}()
	}
	var rec *sqlite.Recorder
	if record != "" {
		o.Attach = func(c clock.Clock) (cycle.Hooks, cycle.Identity, error) {
			var err error
			// The queue holds the whole run: a simulation outruns any disk, and must drop nothing.
			rec, err = sqlite.Open(context.Background(), sqlite.Options{Dir: record, Now: c.Now, Queue: simQueue(o)})
			if err != nil {
				return cycle.Hooks{}, cycle.Identity{}, fmt.Errorf("--record: %w", err)
			}
			return rec.Hooks(), rec.Identity(), nil
		}
	}
	rep, err = sim.Run(context.Background(), o)
	if rec != nil {
		err = errors.Join(err, rec.Close())
	}
	return rep, err
}

// simQueue is a recorder queue that holds every record of the run o.
func simQueue(o sim.Options) int {
	n := o.Ticks
	if n == 0 {
		n = int(o.For/time.Millisecond) + 1 // at most one tick a millisecond is a generous bound
	}
	return 4*n + 1024
}

// writeReports writes the report in DIR as report.txt and report.json.
func writeReports(dir string, rep *sim.Report) error {
	for name, write := range map[string]func(io.Writer) error{"report.txt": rep.WriteText, "report.json": rep.WriteJSON} {
		fh, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		if err := errors.Join(write(fh), fh.Close()); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	return nil
}

// bufferSummaries makes o encode its summaries into memory on the tick's goroutine and
// write them to w when the simulation is idle (the engine's goroutines make no system
// calls; see package sim). It returns the function that writes out the rest.
func bufferSummaries(o *sim.Options, w io.Writer) (flush func() error) {
	var mu sync.Mutex
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	o.Summaries = func(s *faultsummary.Summary) error {
		mu.Lock()
		defer mu.Unlock()
		return enc.Encode(s)
	}
	o.Idle = func() error {
		mu.Lock()
		defer mu.Unlock()
		if buf.Len() < 1<<16 {
			return nil
		}
		_, err := buf.WriteTo(w)
		return err
	}
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		_, err := buf.WriteTo(w)
		return err
	}
}
