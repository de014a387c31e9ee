// Command soak runs the real cycled daemon at 100 Hz under randomly changing faults and
// checks every tick summary with the invariant checker (faultsummary/check). It is what
// `make soak` runs:
//
//	go run ./tools/soak [-duration 60s] [-seed N] [-tolerance 20ms] [-allow RULES] [-race] [-bin PATH] [-keep]
//
// The duration defaults to $SOAK, else 60s. Everything runs on loopback and stops by itself.
// -allow (default $SOAK_ALLOW) names checker rules whose violations are reported but do not
// fail the run, and known-issue keys (reload_syntax: a reload of a file that is not YAML
// answered 500): a way to keep a known, reported issue from hiding new ones; -keep keeps the
// configuration, the daemon's log, and every summary that broke an invariant with the
// summaries before it (the windows of retry budgets and rate breakers span several ticks).
//
// # What runs
//
// The daemon (built from cmd/cycled, or -bin) runs a generated configuration (see gen.go)
// of 50 builtin modules across the five seed tiers, period 10 ms, overrun skip, with a
// random admin token. Meanwhile:
//
//   - a fault driver switches faults of random modules through POST /modules/{name}/faults
//     (latency spikes past the budgets, transient errors, permanent errors of every
//     permanent kind, first-attempt failures, hangs that ignore the context, panics, control
//     "errors") and resets them a few seconds later, at most 8 at a time; every few seconds
//     the safety module s_flaky fails (or hangs) for 0.2-1.5 s, which must put the daemon in
//     emergency mode and out again;
//   - clients poll GET /ticks/latest with If-None-Match, long-poll it (?wait=2s&after=ID),
//     hold SSE streams (one of them reading too slowly on purpose) and reconnect with and
//     without Last-Event-ID, and read the other routes;
//   - a registrar registers remote modules (kind http, served by an HTTP server of the soak
//     on loopback) and deregisters them a few seconds later; if the daemon refuses the http
//     kind it registers builtin modules instead and says so in the report;
//   - a reloader rewrites the configuration file with the other valid variant (200) or an
//     invalid one (422: the running configuration stays) and POSTs /config/reload;
//   - a resetter resets breakers (mostly open ones) and emergency mode;
//   - remote modules carry a secret in their URL query and Authorization header, and a
//     reader checks that no read route shows it;
//   - an attacker, sending from 127.0.0.2 (so that the slow-down of its failed
//     authentications does not fall on the operators' 127.0.0.1), sends admin requests with
//     wrong tokens, with a foreign Host and Origin (a DNS-rebinding page), and cross-site:
//     every one must be refused (401, 403, 429), and the module it tries to register, whose
//     URL is the attacker's, must never exist or be called; the same requests go to a
//     second daemon without a token (the default a DNS-rebinding page aims at), where they
//     must be refused too while a same-origin loopback request (the daemon's own page) is
//     served.
//
// # What is checked
//
//   - Every summary, from tick 1 to the last, with faultsummary/check: the feed reads the SSE
//     stream and fills every gap from GET /ticks?limit=N&before=ID (the history keeps
//     several seconds); a tick no longer in the history when needed is "missed" and fails
//     the soak. The checker is told the configuration in force for each summary (recognised
//     from its module lines: the variant's marker module and the runtime modules) and every
//     operator reset, with the ticks that were the latest around it.
//   - The wall-clock tolerance of the checker is -tolerance (default 20 ms, two periods): it
//     absorbs scheduler and GC pauses on a loaded two-core machine and stays well below the
//     shortest injected hang (50 ms), so a tier that waited for a hung module is caught. On a
//     machine saturated by other work every process stalls for tens of milliseconds: a probe
//     thread measures such stalls, and a tier_budget violation in a tick that overlaps one is
//     reported as excused by the host rather than failing the run (stall.go).
//   - Every second: /healthz is 200 "ok" and the last tick id advanced; go_goroutines and
//     process_resident_memory_bytes from /metrics are recorded, and each retry budget's
//     counters are compared with the summaries: its first attempts are those the summaries
//     show, and it allowed at least the retries they show (budgets.go).
//   - Goroutines and RSS are bounded: the samples are split into thirds; the first third is
//     warm-up; the mean of the last third must be at most the mean of the middle third
//     × 1.05 + 10 goroutines, and × 1.10 + 8 MiB of RSS (sampler.go).
//   - Every request answered as expected (no 5xx, no transport error), the admin token never
//     in the daemon's log, GET /config or the state file, the remote modules' secret and the
//     attacker's wrong token never in the log or a read answer, every remote request with
//     its Authorization header, the refusals logged and counted in /metrics, and SIGTERM
//     ends the daemon with exit code 0 within 5 s.
//
// The report goes to stdout; the exit code is 1 on any violation or failure.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	o, ok := parseFlags(args, stderr)
	if !ok {
		return 2
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "soak: "+format+"\n", a...) }
	tmp, err := os.MkdirTemp("", "cycled-soak-")
	if err != nil {
		logf("%v", err)
		return 1
	}
	if o.keep {
		logf("keeping %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	r := &runner{o: o, tmp: tmp, logf: logf}
	if err := r.configure(); err != nil {
		logf("%v", err)
		return 1
	}
	// The token-less daemon first: its start must not disturb the ticks checked.
	tokenless, err := startTokenless(r.o.bin, tmp)
	if err != nil {
		logf("the token-less daemon did not start: %v", err)
		return 1
	}
	defer tokenless.kill()
	d, err := startDaemon(r.o.bin, r.cfgPath)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer d.kill()
	if o.keep {
		defer func() { _ = os.WriteFile(filepath.Join(tmp, "daemon.log"), []byte(d.logText()), 0o600) }()
	}
	logf("daemon pid %d on %s; soaking for %s (seed %d)", d.pid, d.base, o.duration, o.seed)
	r.connect(d)
	defer r.s.remote.close()
	if err := r.s.arm(tokenless, logf); err != nil {
		logf("%v", err)
		return 1
	}
	if !r.waitReady() {
		return 1
	}
	crashed, elapsed := r.soak()
	if !r.report(crashed, elapsed).write(stdout) {
		fmt.Fprintf(stderr, "\nlast lines of the daemon's log:\n%s\n", d.tail(30))
		return 1
	}
	return 0
}

// options are the command's flags.
type options struct {
	duration time.Duration
	seed     uint64
	tol      time.Duration
	race     bool
	bin      string
	keep     bool
	allow    map[string]bool // rules and known issues that do not fail the soak
}

// parseFlags parses the command line (and $SOAK, $SOAK_ALLOW); false after an error,
// which it has printed.
func parseFlags(args []string, stderr io.Writer) (options, bool) {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := 60 * time.Second
	if v := os.Getenv("SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintf(stderr, "soak: SOAK=%q: %v\n", v, err)
			return options{}, false
		}
		def = d
	}
	var o options
	fs.DurationVar(&o.duration, "duration", def, "how long to soak (default $SOAK, else 60s)")
	fs.Uint64Var(&o.seed, "seed", 0, "random seed (0: from the clock)")
	fs.DurationVar(&o.tol, "tolerance", 20*time.Millisecond, "how far past its budget a tier may run on the wall clock")
	fs.BoolVar(&o.race, "race", false, "build the daemon with the race detector")
	fs.StringVar(&o.bin, "bin", "", "daemon binary (default: build ./cmd/cycled)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (configuration, state, daemon log, violating summaries)")
	allow := fs.String("allow", os.Getenv("SOAK_ALLOW"), "comma-separated checker rules (and known-issue keys such as reload_syntax) that are listed but do not fail the soak (default $SOAK_ALLOW)")
	if err := fs.Parse(args); err != nil {
		return options{}, false
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	o.allow = map[string]bool{}
	for _, a := range strings.Split(*allow, ",") {
		if a = strings.TrimSpace(a); a != "" {
			o.allow[a] = true
		}
	}
	return o, true
}

// runner is one soak: its options, the generated configuration, the daemon and the actors
// that drive and watch it.
type runner struct {
	o       options
	tmp     string
	logf    func(format string, a ...any)
	set     settings
	mods    []module
	book    *book
	cfgPath string

	d     *daemon
	f     *feed
	s     *soak
	smp   *sampler
	probe *stallProbe
}

// configure builds the daemon unless -bin names one, and writes the first variant of the
// generated configuration.
func (r *runner) configure() error {
	if r.o.bin == "" {
		r.logf("building the daemon")
		bin, err := buildDaemon(context.Background(), r.tmp, r.o.race)
		if err != nil {
			return err
		}
		r.o.bin = bin
	}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	r.set = settings{
		// Enough history to fill any gap of the SSE feed (several seconds), small enough
		// that it is full within the warm-up third of the run (the RSS trend rule).
		history:  min(2000, max(300, int(r.o.duration/time.Second)*100/6)),
		token:    "soak-" + hex.EncodeToString(tok),
		stateDir: filepath.Join(r.tmp, "state"),
	}
	r.mods = genModules()
	yamls := map[string]string{}
	for _, v := range variants {
		yamls[v.marker] = render(v, r.mods, r.set)
	}
	bk, err := newBook(yamls)
	if err != nil {
		return fmt.Errorf("generated configuration: %w", err)
	}
	r.book = bk
	r.cfgPath = filepath.Join(r.tmp, "cycled.yaml")
	return writeAtomic(r.cfgPath, yamls[variants[0].marker])
}

// connect makes the client, the checker's feed, the remote modules' server and the actors
// for the daemon d.
func (r *runner) connect(d *daemon) {
	r.d = d
	c := newClient(d.base, r.set.token)
	ops := newOpLog()
	r.f = newFeed(c, r.book, ops, r.o.tol, variants[0].marker)
	if r.o.keep {
		r.f.dump = filepath.Join(r.tmp, "violations")
	}
	r.s = &soak{c: c, feed: r.f, ops: ops, book: r.book, remote: newRemote(r.o.seed), mods: r.mods, set: r.set,
		cfg: r.cfgPath, seed: r.o.seed, counts: map[string]int{}, httpKind: true}
	r.smp = &sampler{c: c, pid: d.pid}
	r.probe = &stallProbe{}
}

// waitReady waits until the first tick has completed (before it, GET /ticks/latest answers
// 503); false, said, when it does not come within 20 s.
func (r *runner) waitReady() bool {
	for deadline := time.Now().Add(20 * time.Second); ; {
		res, err := r.s.c.do(context.Background(), "GET", "/readyz", nil, false)
		if err == nil && res.status == 200 {
			return true
		}
		if time.Now().After(deadline) {
			r.logf("the daemon is not ready after 20 s (%v %d):\n%s", err, res.status, r.d.tail(30))
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// soak runs the feed and the actors for the duration, or until the daemon exits (crashed),
// and reports how long it ran.
func (r *runner) soak() (crashed bool, elapsed time.Duration) {
	t0 := time.Now()
	fctx, fcancel := context.WithCancel(context.Background())
	var fwg sync.WaitGroup
	fwg.Add(2)
	go func() { defer fwg.Done(); r.f.stream(fctx) }()
	go func() { defer fwg.Done(); r.f.run(fctx) }()

	actx, acancel := context.WithTimeout(context.Background(), r.o.duration)
	defer acancel()
	var awg sync.WaitGroup
	s := r.s
	for _, fn := range []func(context.Context){
		func(ctx context.Context) { r.smp.run(ctx, t0) }, r.probe.run, s.faults,
		func(ctx context.Context) { s.poller(ctx, 0) }, func(ctx context.Context) { s.poller(ctx, 1) },
		s.longPoller, func(ctx context.Context) { s.sseHolder(ctx, 0, false) },
		func(ctx context.Context) { s.sseHolder(ctx, 1, true) }, s.reader, s.registrar, s.reloader, s.resetter,
		s.leakReader, s.attacker, s.rebinder,
	} {
		awg.Add(1)
		go func() { defer awg.Done(); fn(actx) }()
	}
	crashed = r.await(actx, acancel, t0)
	awg.Wait()
	fcancel()
	fwg.Wait()
	return crashed, time.Since(t0)
}

// await logs progress until ctx ends or the daemon exits (true; it then cancels ctx).
func (r *runner) await(ctx context.Context, cancel context.CancelFunc, t0 time.Time) bool {
	progress := time.NewTicker(progressEvery(r.o.duration))
	defer progress.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-r.d.exited:
			cancel()
			return true
		case <-progress.C:
			r.logProgress(t0)
		}
	}
}

// logProgress logs how far the checker got and the last resource sample.
func (r *runner) logProgress(t0 time.Time) {
	r.smp.mu.Lock()
	var g, rss float64
	if n := len(r.smp.samples); n > 0 {
		g, rss = r.smp.samples[n-1].goroutines, r.smp.samples[n-1].rss
	}
	r.smp.mu.Unlock()
	last, vs := r.f.progress()
	real, excused := r.probe.split(vs)
	r.s.mu.Lock()
	nf := len(r.s.failures)
	r.s.mu.Unlock()
	r.logf("%3.0fs: checked up to tick %d, %d violation(s) (+%d excused by host stalls), %d failure(s), %.0f goroutines, RSS %.1f MiB",
		time.Since(t0).Seconds(), last, len(real), len(excused), nf, g, rss/(1<<20))
}

// report drains the feed and stops the daemon (unless it crashed), checks for the token
// in what the daemon shows, and returns the report.
func (r *runner) report(crashed bool, elapsed time.Duration) *report {
	var drainErr error
	var leaks []string
	if !crashed {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		drainErr = r.f.drain(dctx)
		cancel()
		leaks = r.s.tokenLeaks(context.Background(), r.d)
		leaks = append(leaks, r.s.hostileLeaks(context.Background(), r.d.logText())...)
	}
	leaks = append(leaks, r.s.tokenlessLeaks(context.Background())...)
	exitCode, took, stopErr := r.d.stop(5 * time.Second)
	if strings.Contains(r.d.logText(), r.set.token) {
		leaks = append(leaks, "the admin token appears in the daemon's log")
	}
	leaks = append(leaks, r.s.logLeaks(r.d.logText())...) // the whole log, shutdown included
	return &report{s: r.s, f: r.f, smp: r.smp, probe: r.probe, d: r.d, allowed: r.o.allow, duration: r.o.duration,
		elapsed: elapsed, seed: r.o.seed, tol: r.o.tol, crashed: crashed, drainErr: drainErr, leaks: leaks,
		exitCode: exitCode, stopTook: took, stopErr: stopErr, history: r.set.history}
}

func progressEvery(d time.Duration) time.Duration {
	switch {
	case d <= time.Minute:
		return 10 * time.Second
	case d <= 10*time.Minute:
		return 30 * time.Second
	}
	return time.Minute
}

// report is the end of a soak.
type report struct {
	s        *soak
	f        *feed
	smp      *sampler
	probe    *stallProbe
	allowed  map[string]bool // rules whose violations do not fail the soak
	d        *daemon
	duration time.Duration
	elapsed  time.Duration
	seed     uint64
	tol      time.Duration
	history  int

	crashed  bool
	drainErr error
	leaks    []string
	exitCode int
	stopTook time.Duration
	stopErr  error
}

// write prints the report and returns whether the soak passed.
func (r *report) write(w io.Writer) bool {
	_, all := r.f.progress()
	vs, excused := r.probe.split(all)
	gt, rt := r.trends()
	known := r.knownKeys()
	fails := r.failures(vs, gt, rt, known)
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	r.printCounts(p, len(vs), len(excused))
	r.printResources(p, gt, rt)
	r.printIssues(p, vs, known)
	if len(fails) == 0 {
		p("PASS")
		return true
	}
	p("FAIL")
	for i, e := range fails {
		if i == 30 {
			p("  … and %d more", len(fails)-30)
			break
		}
		p("  - %s", e)
	}
	return false
}

// trends judges the goroutine and RSS samples.
func (r *report) trends() (goroutines, rss trend) {
	var gs, rs []float64
	for _, sm := range r.smp.samples {
		gs = append(gs, sm.goroutines)
		rs = append(rs, sm.rss)
	}
	return judge(gs, goroutineRel, goroutineAbs), judge(rs, rssRel, rssAbs)
}

// knownKeys returns the keys of the known issues seen, sorted.
func (r *report) knownKeys() []string {
	var keys []string
	for k := range r.s.knownIssues {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// failures lists every reason the soak fails: the violations vs not allowed, and every
// other problem found.
func (r *report) failures(vs []violation, gt, rt trend, known []string) []string {
	s, f := r.s, r.f
	var fails []string
	failf := func(format string, a ...any) { fails = append(fails, fmt.Sprintf(format, a...)) }
	if r.crashed {
		failf("the daemon exited during the soak: %v", r.d.err)
	}
	if n := len(slices.DeleteFunc(slices.Clone(vs), func(v violation) bool { return r.allowed[v.Rule] })); n > 0 {
		failf("%d invariant violation(s)", n)
	}
	if f.missed > 0 {
		failf("%d tick(s) missed (not in the history when the feed needed them)", f.missed)
	}
	for _, e := range f.errs {
		failf("feed: %s", e)
	}
	for _, e := range s.failures {
		failf("client: %s", e)
	}
	for _, k := range known {
		if !r.allowed[k] {
			failf("%s (%d times)", s.knownIssues[k], s.counts["known."+k])
		}
	}
	for _, e := range r.smp.problems {
		failf("sampler: %s", e)
	}
	if r.drainErr != nil {
		failf("final drain: %v", r.drainErr)
	}
	for _, m := range budgetMismatches(f.budgets, r.smp.budgets) {
		failf("retry budget counts: %s", m)
	}
	for _, l := range r.leaks {
		failf("%s", l)
	}
	if !r.crashed && (r.stopErr != nil || r.exitCode != 0) {
		failf("SIGTERM: exit code %d after %s (%v)", r.exitCode, r.stopTook.Round(time.Millisecond), r.stopErr)
	}
	if !gt.bounded {
		failf("goroutines grow: mean %.0f in the middle third, %.0f in the last", gt.middle, gt.last)
	}
	if !rt.bounded {
		failf("RSS grows: mean %.1f MiB in the middle third, %.1f MiB in the last", rt.middle/(1<<20), rt.last/(1<<20))
	}
	if gt.n < 6 {
		failf("too few resource samples (%d) to judge a trend", gt.n)
	}
	return fails
}

// printCounts prints what the soak did and saw: ticks, invariants, faults, clients.
func (r *report) printCounts(p func(string, ...any), violations, excused int) {
	s, f, st := r.s, r.f, r.f.stats
	p("cycled soak: %s at 100 Hz (period 10ms), %d configured modules + runtime registrations, seed %d",
		r.duration, len(s.mods)+1, r.seed)
	p("  ticks            %d checked (ids %d..%d), %d missed; %.1f ticks/s; %d overruns, %d skipped grid points",
		st.ticks, st.firstID, st.lastID, f.missed, float64(st.ticks)/r.elapsed.Seconds(), st.overruns, st.skippedPoints)
	p("  start lag        p50 %.3f ms, p99 %.3f ms, max %.3f ms; longest tick %.1f ms",
		st.percentile(0.5), st.percentile(0.99), st.percentile(1), st.maxWallMs)
	p("  invariants       %d violation(s) in %d summaries (faultsummary/check, tolerance %s, %d reconfigurations followed)",
		violations, f.chk.Checked(), r.tol, f.reconfigs)
	ns, worst, stalled := r.probe.summary()
	p("  host stalls      %d measured by the probe (worst %s, total %s); %d tier_budget violation(s) in ticks overlapping them excused",
		ns, worst.Round(time.Millisecond), stalled.Round(time.Millisecond), excused)
	var kinds []string
	total := 0
	for _, k := range faultKinds {
		n := s.get("fault." + k)
		total += n
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	p("  faults injected  %d: %s; %d reset", total, strings.Join(kinds, ", "), s.get("fault.reset"))
	p("  safety episodes  %d (fail %d, hang %d)", s.get("safety.fail")+s.get("safety.hang"), s.get("safety.fail"), s.get("safety.hang"))
	p("  emergency        %d episode(s), %d tick(s) in emergency mode", st.episodes, st.emergencyTicks)
	p("  outcomes         %s", formatCounts(st.statuses))
	p("  ticks finished   %s; %d tier budget violations", formatCounts(st.finishes), st.budgetViolations)
	p("  breakers         %d opened (stream events); %d breaker resets, %d emergency resets",
		f.breakerOpens, s.get("reset.breaker"), s.get("reset.emergency"))
	remoteKind := "http"
	if s.kindNote != "" {
		remoteKind = "builtin fallback"
	}
	p("  remote modules   %d registered (%s), %d deregistered; %d requests served by the soak's module server",
		s.get("remote.registered.http")+s.get("remote.registered.builtin"), remoteKind, s.get("remote.deregistered"), s.remote.requests.Load())
	p("  reloads          %d valid, %d invalid (422, configuration kept)", s.get("reload.valid"), s.get("reload.invalid"))
	s.printHostile(p)
	p("  clients          polls %d (200) + %d (304); long-polls %d (slowest %.1f ms); SSE %d connections, %d tick events, %d skip notices; %d other reads",
		s.get("poll.200"), s.get("poll.304"), s.get("longpoll"), float64(s.get("longpoll.worst_us"))/1000,
		s.get("sse.connects"), s.get("sse.ticks"), s.get("sse.skipped_notices"), s.get("reads"))
	r.printBudgets(p)
	p("  checker feed     %d from the stream, %d filled from GET /ticks, %d reconnects, %d skip notices; history %d",
		f.sseTicks, f.filled, f.reconnects, f.sseSkips, r.history)
}

// printBudgets prints each retry budget's counts as the summaries show them and as the
// daemon's last scrape did (budgets.go).
func (r *report) printBudgets(p func(string, ...any)) {
	if len(r.smp.budgets) == 0 {
		return
	}
	last := r.smp.budgets[len(r.smp.budgets)-1]
	for _, name := range slices.Sorted(maps.Keys(last.counts)) {
		d := last.counts[name]
		t, ok := r.f.budgets.through(name, last.after)
		if !ok {
			continue
		}
		p("  retry budget     %s by tick %d: %d first attempts, %d retries made (summaries); the daemon %d and %d allowed (%d scrapes compared)",
			name, last.after, t.firsts, t.retries, d.firsts, d.retries, len(r.smp.budgets))
	}
}

// printResources prints the goroutine and RSS trends and how the daemon ended.
func (r *report) printResources(p func(string, ...any), gt, rt trend) {
	mib := func(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
	verdict := func(t trend) string {
		if t.bounded {
			return "bounded"
		}
		return "GROWING"
	}
	p("  goroutines       max %.0f; mean %.0f (middle third) → %.0f (last third): %s", gt.max, gt.middle, gt.last, verdict(gt))
	p("  RSS              max %s; mean %s (middle third) → %s (last third): %s", mib(rt.max), mib(rt.middle), mib(rt.last), verdict(rt))
	p("  daemon           healthz ok %d/%d s, ticks advanced every second; SIGTERM → exit %d in %s",
		r.smp.healthOK, len(r.smp.samples), r.exitCode, r.stopTook.Round(time.Millisecond))
	if r.s.kindNote != "" {
		p("  note             %s", r.s.kindNote)
	}
	if r.s.hostileNote != "" {
		p("  note             %s", r.s.hostileNote)
	}
}

// printIssues prints the allowed known issues and the violations, by rule and the first
// twenty of them.
func (r *report) printIssues(p func(string, ...any), vs []violation, known []string) {
	for _, k := range known {
		if r.allowed[k] {
			p("  known issue      %s: %s (%d times; allowed)", k, r.s.knownIssues[k], r.s.counts["known."+k])
		}
	}
	if len(vs) == 0 {
		return
	}
	byRule := map[string]int{}
	for _, v := range vs {
		byRule[v.Rule]++
	}
	p("  violations by rule: %s", formatCounts(byRule))
	if len(r.allowed) > 0 {
		var names []string
		for k := range r.allowed {
			names = append(names, k)
		}
		sort.Strings(names)
		p("  allowed (known issues, not failing the soak): %s", strings.Join(names, ", "))
	}
	for i, v := range vs {
		if i == 20 {
			p("    … and %d more", len(vs)-20)
			break
		}
		p("    %s", v.Violation)
	}
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
