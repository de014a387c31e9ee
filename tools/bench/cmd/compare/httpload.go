package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cycled/cycled/tools/bench/stats"
)

// httpResult is one HTTP-load run against the daemon.
type httpResult struct {
	Timing     string        `json:"timing"`
	Unlimited  bool          `json:"unlimited_reads,omitempty"` // the daemon ran with http.read_limit.rate 0
	Rep        int           `json:"rep"`
	IdleLag    stats.Summary `json:"idle_lag_us"`
	IdleMissed int           `json:"idle_missed"`
	// Load: the load generator at normal priority; Niced: the same under nice 19.
	Load     loadPhase `json:"load"`
	Niced    loadPhase `json:"niced"`
	LongPoll loadPhase `json:"long_poll"` // 64 long-polling clients, normal priority
}

// loadPhase is the daemon's tick start lag and the clients' view during one load phase.
type loadPhase struct {
	Lag       stats.Summary `json:"lag_us"`
	Missed    int           `json:"missed"`
	Requests  int           `json:"requests"`
	Errors    int           `json:"errors"`
	RPS       float64       `json:"rps"`
	Latency   stats.Summary `json:"latency_us"`
	BodyBytes float64       `json:"body_bytes"`
}

// loadResult is what the load generator child prints.
type loadResult struct {
	Start     int64         `json:"start_unix_nano"`
	End       int64         `json:"end_unix_nano"`
	Requests  int           `json:"requests"`
	Errors    int           `json:"errors"`
	Latency   stats.Summary `json:"latency_us"`
	BodyBytes float64       `json:"body_bytes"`
}

// childLoad keeps conns keep-alive connections in a tight loop of GET url (full body, no
// ETag) for dur and prints a loadResult.
//
// With longPoll each client long-polls for the tick after the last one it saw
// (?wait=5s&after=ID, the id taken from the ETag), which is how a client that wants every
// tick is meant to poll: it answers once per tick.
func childLoad(url string, conns int, dur time.Duration, longPoll bool) {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(dur))
	defer cancel()
	var (
		mu    sync.Mutex
		lat   []float64
		errs  int
		bytes int64
		wg    sync.WaitGroup
	)
	for range conns {
		wg.Go(func() {
			var my []float64
			var myErr int
			var myBytes int64
			var after string
			for ctx.Err() == nil {
				u := url
				if longPoll && after != "" {
					u += "?wait=5s&after=" + after
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
				t0 := time.Now()
				res, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						myErr++
					}
					continue
				}
				n, err := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if tag := res.Header.Get("ETag"); tag != "" {
					after = strings.Trim(tag[strings.LastIndexByte(tag, '-')+1:], `"`)
				}
				if err != nil || res.StatusCode != http.StatusOK {
					if ctx.Err() == nil {
						myErr++
					}
					continue
				}
				my = append(my, float64(time.Since(t0).Nanoseconds())/1e3)
				myBytes += n
			}
			mu.Lock()
			lat = append(lat, my...)
			errs += myErr
			bytes += myBytes
			mu.Unlock()
		})
	}
	wg.Wait()
	end := time.Now()
	r := loadResult{Start: start.UnixNano(), End: end.UnixNano(), Requests: len(lat), Errors: errs, Latency: stats.Summarize(lat)}
	if len(lat) > 0 {
		r.BodyBytes = float64(bytes) / float64(len(lat))
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

// daemonConfig is the daemon's configuration: 100 Hz, history 1000, the five seed tiers
// with 10 trivial builtin modules each, m's timing, and the default read limit unless m
// lifts it.
func daemonConfig(addr string, m httpMode, stateDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cycle: {period: 10ms, overrun: skip, history: 1000, timing: %s}\n", m.timing)
	limit := ""
	if m.unlimited {
		limit = ", read_limit: {rate: 0}"
	}
	fmt.Fprintf(&b, "http: {addr: %q%s}\nlog: {level: warn, format: json}\nstate_dir: %q\n", addr, limit, stateDir)
	b.WriteString("tiers:\n")
	tiers := []string{"safety", "knowledge", "perception", "planning", "execution"}
	for _, t := range tiers {
		fmt.Fprintf(&b, "  - name: %s\n", t)
	}
	b.WriteString("modules:\n")
	for i := range 50 {
		fmt.Fprintf(&b, "  - name: m%d\n    tier: %s\n    builtin: {value: {ok: true, i: %d}}\n", i, tiers[i%5], i)
	}
	return b.String()
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatalf("listen: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

type tickJSON struct {
	TickID            uint64    `json:"tick_id"`
	ScheduledAt       time.Time `json:"scheduled_at"`
	StartedAt         time.Time `json:"started_at"`
	StartLagMs        float64   `json:"start_lag_ms"`
	SkippedGridPoints int       `json:"skipped_grid_points"`
}

// fetchTicks returns the summaries in the daemon's history (the last 1000 ticks).
func fetchTicks(client *http.Client, base string) []tickJSON {
	res, err := client.Get(base + "/ticks?limit=1000")
	if err != nil {
		fatalf("GET /ticks: %v", err)
	}
	defer res.Body.Close()
	var list struct {
		Ticks []tickJSON `json:"ticks"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		fatalf("GET /ticks: %v", err)
	}
	return list.Ticks
}

// lagsBetween returns the start lags (µs) and missed grid points of the ticks started in [a, b).
func lagsBetween(ticks []tickJSON, a, b time.Time) ([]float64, int) {
	var lags []float64
	missed := 0
	for _, t := range ticks {
		if !t.StartedAt.Before(a) && t.StartedAt.Before(b) {
			lags = append(lags, t.StartLagMs*1e3)
			missed += t.SkippedGridPoints
		}
	}
	return lags, missed
}

func runHTTP(o *opts) []httpResult {
	phase, warm := 3*time.Second, time.Second
	if o.quick {
		phase, warm = time.Second, 500*time.Millisecond
	}
	dir, err := os.MkdirTemp("", "cycled-bench-http")
	if err != nil {
		fatalf("%v", err)
	}
	defer os.RemoveAll(dir)
	modes := httpModes
	var out []httpResult
	for rep := 1; rep <= o.reps; rep++ {
		// The order of the daemon runs rotates from one repetition to the next.
		for k := range modes {
			m := modes[(k+rep-1)%len(modes)]
			r := httpRun(o, dir, m, phase, warm)
			r.Rep = rep
			logf("http rep %d %-13s: start lag p99 idle %7.1f µs (missed %d); load %6.0f req/s p99 %7.0f µs: lag p99 %7.1f µs (missed %d); niced load %6.0f req/s p99 %7.0f µs: lag p99 %7.1f µs (missed %d)",
				rep, m.label(), r.IdleLag.P99, r.IdleMissed, r.Load.RPS, r.Load.Latency.P99, r.Load.Lag.P99, r.Load.Missed,
				r.Niced.RPS, r.Niced.Latency.P99, r.Niced.Lag.P99, r.Niced.Missed)
			logf("http rep %d %-13s: long-poll %6.0f req/s: lag p99 %7.1f µs (missed %d)", rep, m.label(), r.LongPoll.RPS, r.LongPoll.Lag.P99, r.LongPoll.Missed)
			out = append(out, r)
		}
	}
	return out
}

// httpMode is how the daemon runs in one HTTP measurement: its timing, and whether its
// read requests are paced at its default http.read_limit or not at all (rate 0).
type httpMode struct {
	timing    string
	unlimited bool
}

func (m httpMode) label() string {
	if m.unlimited {
		return m.timing + ", read_limit.rate 0"
	}
	return m.timing
}

// httpModes are the daemon's modes measured: both timings with the default configuration
// (the targets), and both with the read limit lifted (what the limit buys).
var httpModes = []httpMode{{"coarse", false}, {"precise", false}, {"coarse", true}, {"precise", true}}

func httpRun(o *opts, dir string, m httpMode, phase, warm time.Duration) httpResult {
	addr := freeAddr()
	name := fmt.Sprintf("%s-%t", m.timing, m.unlimited)
	cfgPath := filepath.Join(dir, "cycled-"+name+".yaml")
	stateDir := filepath.Join(dir, "state-"+name)
	if err := os.WriteFile(cfgPath, []byte(daemonConfig(addr, m, stateDir)), 0o644); err != nil {
		fatalf("%v", err)
	}
	cmd := exec.Command(o.daemon, "run", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Env = append(os.Environ(), "CYCLED_CONFIG=")
	if err := cmd.Start(); err != nil {
		fatalf("daemon: %v", err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	base := "http://" + addr
	tr := &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 64, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	ready := time.Now().Add(15 * time.Second)
	for {
		res, err := client.Get(base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(ready) {
			fatalf("daemon not ready on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(warm)

	r := httpResult{Timing: m.timing, Unlimited: m.unlimited}
	idleA := time.Now()
	time.Sleep(phase)
	idleB := time.Now()
	// The history keeps 1000 ticks (10 s): the summaries are fetched after every phase.
	var ticks []tickJSON
	seen := map[uint64]bool{}
	collect := func() {
		for _, t := range fetchTicks(client, base) {
			if !seen[t.TickID] {
				seen[t.TickID] = true
				ticks = append(ticks, t)
			}
		}
	}
	collect()

	// 64 connections in a tight loop on GET /ticks/latest, from a child process: first at
	// normal priority, then under nice 19 (a client that yields the CPUs to the daemon, as a
	// client on another machine would).
	var normal, niced, longPoll loadResult
	runLoad := func(out *loadResult, nice, poll bool) {
		exe, err := os.Executable()
		if err != nil {
			fatalf("%v", err)
		}
		args := []string{exe, "-child", "httpload", "-url", base + "/ticks/latest", "-dur", phase.String()}
		if poll {
			args = append(args, "-longpoll")
		}
		if nice {
			args = append([]string{"nice", "-n", "19"}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			fatalf("load generator: %v", err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			fatalf("load generator: %v", err)
		}
	}
	runLoad(&normal, false, false)
	collect()
	time.Sleep(500 * time.Millisecond)
	runLoad(&niced, true, false)
	collect()
	time.Sleep(500 * time.Millisecond)
	runLoad(&longPoll, false, true)
	collect()

	idle, idleMissed := lagsBetween(ticks, idleA, idleB)
	r.IdleLag, r.IdleMissed = stats.Summarize(idle), idleMissed
	for _, x := range []struct {
		lr  *loadResult
		out *loadPhase
	}{{&normal, &r.Load}, {&niced, &r.Niced}, {&longPoll, &r.LongPoll}} {
		lags, missed := lagsBetween(ticks, time.Unix(0, x.lr.Start), time.Unix(0, x.lr.End))
		*x.out = loadPhase{Lag: stats.Summarize(lags), Missed: missed, Requests: x.lr.Requests, Errors: x.lr.Errors,
			RPS: float64(x.lr.Requests) / (float64(x.lr.End-x.lr.Start) / 1e9), Latency: x.lr.Latency, BodyBytes: x.lr.BodyBytes}
	}
	return r
}
