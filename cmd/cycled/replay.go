package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tools/replaycheck"
)

// replayPage is how many ticks replay reads at a time.
const replayPage = 1000

// stateDirFlags defines --state and --config on fs; the function it returns gives
// --state, else the state_dir of the configuration (--config, $CYCLED_CONFIG, the
// environment), or prints why not (done true, with the exit code).
func stateDirFlags(fs *pflag.FlagSet, stderr io.Writer) func() (dir string, code int, done bool) {
	state := fs.String("state", "", "state directory holding recorder.db (default: the configuration's state_dir)")
	fs.String("config", "", "configuration file (YAML) whose state_dir to use; default $CYCLED_CONFIG, else the embedded demo")
	return func() (string, int, bool) {
		if *state != "" {
			return *state, 0, false
		}
		cfg, err := config.Load(config.WithFlags(fs))
		if err != nil {
			fmt.Fprintln(stderr, "cycled:", err)
			return "", exitError, true
		}
		return cfg.StateDir, 0, false
	}
}

// replay is "cycled replay": the recorded timeline, ticks that were not nominal with
// their lines, and events, as a person reads it or (--json) as JSON lines.
func replay(fs *pflag.FlagSet, stdout, stderr io.Writer) func(args []string) int {
	stateDir := stateDirFlags(fs, stderr)
	check := fs.Bool("check", false, "re-run the current decision rules over the recorded outcomes and list every difference (exit 1 if any)")
	from := fs.Uint64("from", 0, "first tick id (default: the oldest recorded)")
	to := fs.Uint64("to", 0, "last tick id (default: the newest recorded)")
	asJSON := fs.Bool("json", false, "print JSON lines instead of text")
	return func(args []string) int {
		if len(args) > 0 {
			fmt.Fprintf(stderr, "cycled replay: unexpected argument %q\n", args[0])
			return exitUsage
		}
		dir, code, done := stateDir()
		if done {
			return code
		}
		return replayRun(dir, *check, *from, *to, *asJSON, stdout, stderr)
	}
}

// replayRun prints the timeline of the recorder in dir, or (check) its check.
func replayRun(dir string, check bool, from, to uint64, asJSON bool, stdout, stderr io.Writer) int {
	ctx := context.Background()
	rd, err := sqlite.OpenReader(ctx, dir)
	if err != nil {
		fmt.Fprintln(stderr, "cycled replay:", err)
		return exitError
	}
	defer rd.Close()
	if check {
		return replayCheck(ctx, rd, from, to, asJSON, stdout, stderr)
	}
	p := &timeline{w: stdout, json: asJSON}
	if err := p.run(ctx, rd, from, to); err != nil {
		fmt.Fprintln(stderr, "cycled replay:", err)
		return exitError
	}
	return exitOK
}

// replayCheck is "cycled replay --check": every recorded field the current rules decide
// differently, one line each (JSON lines with --json). It exits 0 when nothing differs, 1
// when something does, and 2 when the check could not run.
func replayCheck(ctx context.Context, rd *sqlite.Reader, from, to uint64, asJSON bool, stdout, stderr io.Writer) int {
	diffs, n, err := replaycheck.Check(ctx, rd, from, to)
	if err != nil {
		fmt.Fprintln(stderr, "cycled replay --check:", err)
		return exitUsage
	}
	enc := json.NewEncoder(stdout)
	for _, d := range diffs {
		if asJSON {
			_ = enc.Encode(d)
		} else {
			fmt.Fprintln(stdout, d)
		}
	}
	if !asJSON {
		fmt.Fprintf(stdout, "%d ticks checked, %d differences\n", n, len(diffs))
	}
	if len(diffs) > 0 {
		return exitError
	}
	return exitOK
}

// timeline prints a replay.
type timeline struct {
	w        io.Writer
	json     bool
	okFrom   uint64 // the first of the nominal ticks not printed yet (0: none)
	okTo     uint64
	lastTick uint64
}

func (p *timeline) run(ctx context.Context, rd *sqlite.Reader, from, to uint64) error {
	next := from
	for {
		metas, err := rd.Metas(ctx, next, to, replayPage)
		if err != nil || len(metas) == 0 {
			p.flushOK()
			return err
		}
		last := metas[len(metas)-1].ID
		lines, err := rd.Lines(ctx, metas[0].ID, last)
		if err != nil {
			return err
		}
		evs, err := rd.Events(ctx, recorder.EventQuery{FromTick: max(metas[0].ID, p.lastTick+1), ToTick: last})
		if err != nil {
			return err
		}
		p.page(metas, lines, evs)
		if len(metas) < replayPage {
			p.flushOK()
			return nil
		}
		next = last + 1
	}
}

// page prints a page of ticks with their lines, each event before the tick it belongs to.
func (p *timeline) page(metas []recorder.TickMeta, lines []recorder.Line, evs []recorder.Event) {
	for _, m := range metas {
		for len(evs) > 0 && evs[0].TickID <= m.ID {
			p.flushOK()
			p.event(evs[0])
			evs = evs[1:]
		}
		var mine []recorder.Line
		for len(lines) > 0 && lines[0].TickID == m.ID {
			mine, lines = append(mine, lines[0]), lines[1:]
		}
		if m.Severity == faultsummary.OK && len(mine) == 0 {
			if p.okFrom == 0 {
				p.okFrom = m.ID
			}
			p.okTo = m.ID
		} else {
			p.flushOK()
			p.tick(m, mine)
		}
		p.lastTick = m.ID
	}
	for _, e := range evs {
		p.flushOK()
		p.event(e)
	}
}

func (p *timeline) flushOK() {
	if p.okFrom == 0 {
		return
	}
	if p.json {
		p.emit(map[string]any{"type": "ok", "from": p.okFrom, "to": p.okTo})
	} else if p.okFrom == p.okTo {
		fmt.Fprintf(p.w, "  tick %d ok\n", p.okFrom)
	} else {
		fmt.Fprintf(p.w, "  ticks %d-%d ok\n", p.okFrom, p.okTo)
	}
	p.okFrom = 0
}

func (p *timeline) tick(m recorder.TickMeta, lines []recorder.Line) {
	if p.json {
		if lines == nil {
			lines = []recorder.Line{}
		}
		p.emit(struct {
			Type string `json:"type"`
			recorder.TickMeta
			Lines []recorder.Line `json:"lines"`
		}{"tick", m, lines})
		return
	}
	em := ""
	if m.Emergency {
		em = "  EMERGENCY"
	}
	fmt.Fprintf(p.w, "%s  tick %d  %s  %s%s  (run %s, generation %d)\n", m.StartedAt.Format(time.RFC3339Nano),
		m.ID, m.Severity, m.Finish, em, m.RunID, m.Generation)
	for _, l := range lines {
		detail := ""
		if l.FaultKind != "" {
			detail = "  " + l.FaultKind
		}
		if l.Abandoned {
			detail += "  abandoned"
		}
		if l.Error != "" {
			detail += fmt.Sprintf("  %q", l.Error)
		}
		fmt.Fprintf(p.w, "    %-20s %-12s attempts %d  %.3f ms%s\n", l.Name, l.Status, l.Attempts, l.LatencyMs, detail)
	}
}

func (p *timeline) event(e recorder.Event) {
	if p.json {
		p.emit(struct {
			Type string `json:"type"`
			recorder.Event
		}{"event", e})
		return
	}
	fmt.Fprintf(p.w, "%s  event %s at tick %d: %s\n", e.At.Format(time.RFC3339Nano), e.Kind, e.TickID,
		strings.TrimSpace(string(e.Data)))
}

func (p *timeline) emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(p.w, "%s\n", b)
}

// recorderCmd is "cycled recorder check|vacuum".
func recorderCmd(action string, fs *pflag.FlagSet, stdout, stderr io.Writer) func(args []string) int {
	stateDir := stateDirFlags(fs, stderr)
	var asJSON bool
	if action == "check" {
		fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	}
	return func([]string) int {
		dir, code, done := stateDir()
		if done {
			return code
		}
		ctx := context.Background()
		if action == "vacuum" {
			before, after, err := sqlite.Vacuum(ctx, dir)
			if err != nil {
				fmt.Fprintln(stderr, "cycled recorder vacuum:", err)
				return exitError
			}
			fmt.Fprintf(stdout, "vacuumed: %d bytes -> %d bytes\n", before, after)
			return exitOK
		}
		return recorderCheck(ctx, dir, asJSON, stdout, stderr)
	}
}

func recorderCheck(ctx context.Context, dir string, asJSON bool, stdout, stderr io.Writer) int {
	rd, err := sqlite.OpenReader(ctx, dir)
	if err != nil {
		fmt.Fprintln(stderr, "cycled recorder check:", err)
		return exitError
	}
	defer rd.Close()
	rp, err := rd.Check(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "cycled recorder check:", err)
		return exitError
	}
	if asJSON {
		b, _ := json.Marshal(rp)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprint(stdout, rp.String())
	}
	if !rp.OK() {
		return exitError
	}
	return exitOK
}
