package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sample is one reading of the daemon's resources.
type sample struct {
	at         time.Duration // since the start
	goroutines float64
	rss        float64 // bytes
	tick       uint64  // /healthz last_tick_id
}

// sampler reads /metrics and /healthz every second.
type sampler struct {
	c   *client
	pid int

	mu       sync.Mutex
	samples  []sample
	budgets  []budgetScrape // the retry budgets' counts at each sample (budgets.go)
	healthOK int
	problems []string
}

func (s *sampler) problem(format string, args ...any) {
	s.mu.Lock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *sampler) run(ctx context.Context, t0 time.Time) {
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	var lastTick uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		sm := sample{at: time.Since(t0)}
		before, _ := s.lastTick(ctx)
		r, err := s.c.do(ctx, http.MethodGet, "/metrics", nil, false)
		if ctx.Err() != nil {
			return
		}
		if err != nil || r.status != http.StatusOK {
			s.problem("%s: GET /metrics: %v %d", sm.at.Round(time.Second), err, r.status)
			continue
		}
		sm.goroutines, _ = metricValue(r.body, "go_goroutines")
		if v, ok := metricValue(r.body, "process_resident_memory_bytes"); ok {
			sm.rss = v
		} else {
			sm.rss = procRSS(s.pid)
		}
		h, err := s.c.do(ctx, http.MethodGet, "/healthz", nil, false)
		if ctx.Err() != nil {
			return
		}
		var hz struct {
			Status     string `json:"status"`
			LastTickID uint64 `json:"last_tick_id"`
		}
		if err == nil {
			err = json.Unmarshal(h.body, &hz)
		}
		switch {
		case err != nil:
			s.problem("%s: GET /healthz: %v", sm.at.Round(time.Second), err)
		case h.status != http.StatusOK || hz.Status != "ok":
			s.problem("%s: GET /healthz: %d %s", sm.at.Round(time.Second), h.status, bytes.TrimSpace(h.body))
		case hz.LastTickID <= lastTick:
			s.problem("%s: ticks stopped advancing: last tick %d, a second ago %d", sm.at.Round(time.Second), hz.LastTickID, lastTick)
		default:
			s.mu.Lock()
			s.healthOK++
			s.mu.Unlock()
		}
		sm.tick = hz.LastTickID
		lastTick = max(lastTick, hz.LastTickID)
		s.mu.Lock()
		s.samples = append(s.samples, sm)
		if before > 0 && hz.LastTickID >= before {
			s.budgets = append(s.budgets, budgetScrape{before: before, after: hz.LastTickID, counts: scrapeBudgets(r.body)})
		}
		s.mu.Unlock()
	}
}

// lastTick returns the id of the latest tick /healthz reports (0 on an error).
func (s *sampler) lastTick(ctx context.Context) (uint64, error) {
	h, err := s.c.do(ctx, http.MethodGet, "/healthz", nil, false)
	if err != nil {
		return 0, err
	}
	var hz struct {
		LastTickID uint64 `json:"last_tick_id"`
	}
	err = json.Unmarshal(h.body, &hz)
	return hz.LastTickID, err
}

// metricValue returns the value of an unlabelled metric in a Prometheus text exposition.
func metricValue(body []byte, name string) (float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// procRSS reads VmRSS from /proc (Linux), in bytes; 0 when unavailable.
func procRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// trend is the boundedness verdict on one resource.
//
// The rule: the samples (one a second) are split into thirds by time. The first third is
// warm-up (the history filling, connection pools, the Go heap finding its size) and is
// ignored. The resource is bounded when the mean of the last third is at most the mean of
// the middle third × (1 + rel) + abs: for goroutines × 1.05 + 10, for RSS × 1.10 + 8 MiB.
// The means of two thirds are a third of the run apart, so a leak shows as its rate times
// that: one goroutine a second is +20 over a one-minute soak and fails it; a leak of
// memory fails a one-minute soak from about 0.75 MiB/s, a five-minute soak from about
// 0.15 MiB/s. The margins are there for noise (streams reconnecting, hung modules waiting
// out their hang, GC cycles), which moves the means by a few goroutines and a few MiB.
const (
	goroutineRel, goroutineAbs = 0.05, 10
	rssRel, rssAbs             = 0.10, 8 << 20
)

// trend is the verdict on one resource.
type trend struct {
	max, middle, last float64
	bounded           bool
	n                 int
}

func judge(vals []float64, rel, abs float64) trend {
	t := trend{n: len(vals), bounded: true}
	for _, v := range vals {
		t.max = max(t.max, v)
	}
	if len(vals) < 6 {
		return t // too short to tell: the caller reports it
	}
	third := len(vals) / 3
	t.middle = mean(vals[third : 2*third])
	t.last = mean(vals[2*third:])
	t.bounded = t.last <= t.middle*(1+rel)+abs
	return t
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
