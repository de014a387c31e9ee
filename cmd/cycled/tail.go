package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/pflag"

	"github.com/cycled/cycled/faultsummary"
)

// defaultTailAddr is the daemon "cycled tail" follows without --addr or CYCLED_ADDR: the
// default http.addr.
const defaultTailAddr = "http://127.0.0.1:8080"

// The reconnection backoff of "cycled tail": doubled after every failed attempt, reset by
// a connection that delivered an event.
const (
	tailBackoffMin = 250 * time.Millisecond
	tailBackoffMax = 5 * time.Second
)

// tailOptions are the flags of "cycled tail".
type tailOptions struct {
	addr     string
	modules  []string
	tiers    []string
	severity faultsummary.Severity
	json     bool
	color    bool
}

// runTail is "cycled tail": it follows the daemon's event stream (GET /ticks/stream) and
// prints one line per tick (its id, severity, time, wall time and start lag, and only
// the modules that were not nominal) and one line per breaker, emergency, shedding or
// configuration change, until ctx ends. It reconnects with backoff when the stream ends,
// says so on stderr, and recognises a daemon that restarted. The exit code is 0 when ctx
// ends, 2 on a usage error.
func runTail(ctx context.Context, o tailOptions, stdout, stderr io.Writer) int {
	t := &tailer{o: o, out: stdout, errw: stderr, client: &http.Client{}}
	t.follow(ctx)
	return exitOK
}

// tailFlags defines the flags of "cycled tail" on fs; the function it returns checks them
// and the positional args once parsed, and gives the options, or ok false and the exit
// code when the program should stop.
func tailFlags(fs *pflag.FlagSet) func(args []string, stdout, stderr io.Writer) (o tailOptions, code int, ok bool) {
	var o tailOptions
	addr := fs.String("addr", "", "the daemon's URL (default $CYCLED_ADDR, else "+defaultTailAddr+")")
	fs.StringSliceVar(&o.modules, "module", nil, "show only these modules (repeat or comma-separate); ticks where none of them is off nominal are not shown")
	fs.StringSliceVar(&o.tiers, "tier", nil, "show only the modules of these tiers; ticks where none of them is off nominal are not shown")
	sev := fs.String("severity", "ok", "show only ticks of at least this severity: ok, degraded or critical")
	fs.BoolVar(&o.json, "json", false, "print the summaries of the ticks shown as JSON lines, as the daemon sends them")
	return func(args []string, stdout, stderr io.Writer) (tailOptions, int, bool) {
		o := o
		o.addr = *addr
		return o.finish(*sev, args, stdout, stderr)
	}
}

// finish checks the parsed flags of "cycled tail" (sev is --severity) and the positional
// args, and completes o.
func (o tailOptions) finish(sev string, args []string, stdout, stderr io.Writer) (tailOptions, int, bool) {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "cycled tail: unexpected argument %q (use --addr URL)\n", args[0])
		return o, exitUsage, false
	}
	switch s := faultsummary.Severity(sev); s {
	case faultsummary.OK, faultsummary.Degraded, faultsummary.Critical:
		o.severity = s
	default:
		fmt.Fprintf(stderr, "cycled tail: --severity %q: want ok, degraded or critical\n", sev)
		return o, exitUsage, false
	}
	if o.addr == "" {
		o.addr = os.Getenv("CYCLED_ADDR")
	}
	if o.addr == "" {
		o.addr = defaultTailAddr
	}
	if !strings.Contains(o.addr, "://") {
		o.addr = "http://" + o.addr
	}
	o.addr = strings.TrimRight(o.addr, "/")
	o.color = useColor(stdout)
	return o, exitOK, true
}

// useColor reports whether w is a terminal and NO_COLOR (https://no-color.org) is unset
// or empty.
func useColor(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// tailer follows one daemon's stream across reconnections.
type tailer struct {
	o      tailOptions
	out    io.Writer
	errw   io.Writer
	client *http.Client

	boot       string // the daemon's boot id, from the tick events' ids; "" before the first
	lastID     string // the last tick event's id, sent as Last-Event-ID on reconnection
	lastTick   uint64
	generation uint64 // the configuration generation of the last tick (0: none seen)
}

// follow connects, reads, and reconnects with backoff until ctx ends.
func (t *tailer) follow(ctx context.Context) {
	backoff := tailBackoffMin
	for ctx.Err() == nil {
		got, err := t.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if got {
			backoff = tailBackoffMin
		}
		fmt.Fprintf(t.errw, "cycled tail: %v; reconnecting in %v\n", err, backoff)
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, tailBackoffMax)
	}
}

// stream reads one connection's events until it ends; got reports whether it delivered
// any event.
func (t *tailer) stream(ctx context.Context) (got bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.o.addr+"/ticks/stream", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if t.lastID != "" {
		req.Header.Set("Last-Event-ID", t.lastID) // the same daemon replays the ticks missed
	}
	res, err := t.client.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return false, fmt.Errorf("cannot reach %s: %w", t.o.addr, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET %s/ticks/stream: %s", t.o.addr, res.Status)
	}
	fmt.Fprintf(t.errw, "cycled tail: following %s\n", t.o.addr)
	r := bufio.NewReaderSize(res.Body, 64<<10)
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = errors.New("the stream ended")
			}
			return got, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line != "" {
			ev.add(line)
			continue
		}
		if ev.name != "" || ev.data != "" {
			got = true
			t.handle(ev)
		}
		ev = sseEvent{}
	}
}

// sseEvent is one Server-Sent Event: its name, id and data.
type sseEvent struct {
	name, id, data string
}

// add applies one field line of the event.
func (e *sseEvent) add(line string) {
	field, value, _ := strings.Cut(line, ":")
	value = strings.TrimPrefix(value, " ")
	switch field {
	case "event":
		e.name = value
	case "id":
		e.id = value
	case "data":
		if e.data != "" {
			e.data += "\n"
		}
		e.data += value
	}
}

// handle prints one event.
func (t *tailer) handle(ev sseEvent) {
	switch ev.name {
	case "tick":
		t.tick(ev)
	case "breaker":
		var b faultsummary.BreakerEvent
		if t.decode(ev, &b) && !t.o.json {
			t.printf(colorCyan, b.At, "breaker %s %s → %s (tick %d)%s", b.Breaker, b.From, b.To, b.TickID, suffix(b.Reason))
		}
	case "emergency":
		var e faultsummary.EmergencyEvent
		if !t.decode(ev, &e) || t.o.json {
			return
		}
		if e.Entered {
			latched := ""
			if e.Latched {
				latched = ", latched"
			}
			t.printf(colorRed, e.At, "EMERGENCY entered at tick %d%s%s", e.TickID, latched, suffix(e.Reason))
		} else {
			t.printf(colorGreen, e.At, "emergency left at tick %d%s", e.TickID, suffix(e.Reason))
		}
	case "shed":
		var s faultsummary.ShedEvent
		if !t.decode(ev, &s) || t.o.json {
			return
		}
		verb := "shed"
		if !s.Shed {
			verb = "restored"
		}
		t.printf(colorYellow, time.Time{}, "%s at tick %d: level %d, shedding %s%s", verb, s.TickID, s.Level,
			orNone(s.Modules), suffix(s.Reason))
	}
}

// tick prints a tick's line (or its JSON), after noticing a restarted daemon and a new
// configuration.
func (t *tailer) tick(ev sseEvent) {
	var s faultsummary.Summary
	if !t.decode(ev, &s) {
		return
	}
	boot, _, _ := strings.Cut(ev.id, "-")
	if t.boot != "" && boot != t.boot {
		fmt.Fprintf(t.errw, "cycled tail: the daemon restarted (run %s): tick ids start again at %d\n", s.RunID, s.TickID)
		t.generation = 0
	}
	t.boot, t.lastID, t.lastTick = boot, ev.id, s.TickID
	if t.generation != 0 && s.Generation != t.generation && !t.o.json {
		t.printf(colorCyan, s.StartedAt, "configuration generation %d (was %d): reloaded or a module registered", s.Generation, t.generation)
	}
	t.generation = s.Generation
	mods, shown := t.selectModules(&s)
	if !shown || severityRank(s.OverallSeverity) < severityRank(t.o.severity) {
		return
	}
	if t.o.json {
		fmt.Fprintln(t.out, ev.data)
		return
	}
	t.tickLine(&s, mods)
}

// selectModules returns the lines of s's modules that are not nominal and pass the
// --module and --tier filters; shown is false when a filter is set and none passes.
func (t *tailer) selectModules(s *faultsummary.Summary) (mods []faultsummary.Module, shown bool) {
	filtered := len(t.o.modules) > 0 || len(t.o.tiers) > 0
	for _, m := range s.Modules() {
		if m.Status.Nominal() {
			continue
		}
		if len(t.o.modules) > 0 && !slices.Contains(t.o.modules, m.Name) {
			continue
		}
		if len(t.o.tiers) > 0 && !slices.Contains(t.o.tiers, m.Tier) {
			continue
		}
		mods = append(mods, m)
	}
	return mods, !filtered || len(mods) > 0
}

// tickLine prints a tick's line: id, severity, time, wall time, start lag, then each
// module shown with its status, fault kind and served source.
func (t *tailer) tickLine(s *faultsummary.Summary, mods []faultsummary.Module) {
	var b strings.Builder
	fmt.Fprintf(&b, "tick %d %s wall %s lag %s", s.TickID, t.paint(severityColor(s.OverallSeverity), string(s.OverallSeverity)),
		tailMs(s.WallMs), tailMs(s.StartLagMs))
	if s.EmergencyMode {
		b.WriteString(" " + t.paint(colorRed, "emergency"))
	}
	for _, m := range mods {
		st := string(m.Status)
		if m.FaultKind != "" {
			st += "/" + m.FaultKind
		}
		src := m.Served.Source.String()
		if m.Served.Stale {
			src += ",stale"
		}
		if m.Served.Expired {
			src += ",expired"
		}
		fmt.Fprintf(&b, "  %s=%s served=%s", m.Name, t.paint(statusColor(m.Status), st), src)
	}
	at := s.FinishedAt
	if at.IsZero() {
		at = s.StartedAt
	}
	t.printf("", at, "%s", b.String())
}

// printf prints one line, prefixed with the time at (omitted when zero), in colour c.
func (t *tailer) printf(c string, at time.Time, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if c != "" {
		line = t.paint(c, line)
	}
	if !at.IsZero() {
		line = at.Local().Format("15:04:05.000") + " " + line
	}
	fmt.Fprintln(t.out, line)
}

// decode decodes an event's data into v; a malformed event is reported and skipped.
func (t *tailer) decode(ev sseEvent, v any) bool {
	if err := json.Unmarshal([]byte(ev.data), v); err != nil {
		fmt.Fprintf(t.errw, "cycled tail: a %s event that is not JSON: %v\n", ev.name, err)
		return false
	}
	return true
}

// The ANSI colours of "cycled tail".
const (
	colorRed    = "31"
	colorGreen  = "32"
	colorYellow = "33"
	colorCyan   = "36"
)

// paint wraps s in colour c when colour is on.
func (t *tailer) paint(c, s string) string {
	if !t.o.color || c == "" {
		return s
	}
	return "\x1b[" + c + "m" + s + "\x1b[0m"
}

func severityColor(s faultsummary.Severity) string {
	switch s {
	case faultsummary.Critical:
		return colorRed
	case faultsummary.Degraded:
		return colorYellow
	}
	return colorGreen
}

// statusColor is the colour of a module status off nominal: red for a run that failed,
// yellow for a module that did not run (refused by its breaker or bulkhead, busy, shed).
func statusColor(s faultsummary.Status) string {
	if s.Failing() && !s.Ran() {
		return colorYellow
	}
	return colorRed
}

// severityRank orders severities: ok < degraded < critical.
func severityRank(s faultsummary.Severity) int {
	switch s {
	case faultsummary.Critical:
		return 2
	case faultsummary.Degraded:
		return 1
	}
	return 0
}

// tailMs renders milliseconds with three significant digits or so.
func tailMs(ms float64) string {
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.0fms", ms)
	case ms >= 1:
		return fmt.Sprintf("%.2fms", ms)
	}
	return fmt.Sprintf("%.0fµs", ms*1e3)
}

func suffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
