package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cycled/cycled/tools/bench/stats"
)

type machine struct {
	NumCPU     int    `json:"nproc"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPU        string `json:"cpu"`
	Kernel     string `json:"kernel"`
	Go         string `json:"go"`
	Python     string `json:"python"`
	Date       string `json:"date"`
	Commit     string `json:"commit"`
	// WakeUs and WakeEndUs are the median time, in µs, of a close of a channel that
	// readies a parked goroutine while the other Ps are idle (see wakeCost), measured at
	// the run's start and at its end; 0 with one P.
	WakeUs    float64 `json:"wake_idle_p_us"`
	WakeEndUs float64 `json:"wake_idle_p_end_us"`
}

func describeMachine() machine {
	m := machine{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(b))
	}
	m.WakeUs = wakeProbe()
	return m
}

// wakeProbe runs wakeCost in a child process (0 if it fails, or with one P, where there is
// no other P to wake): a fresh process with a small heap, as the harness's own background
// work (sweeping, scavenging after a section) can keep the other P busy and make the
// wake-up look free.
func wakeProbe() float64 {
	if runtime.GOMAXPROCS(0) < 2 {
		return 0
	}
	var us float64
	if err := runChild(&us, nil, "-child", "wake"); err != nil {
		logf("wake-up probe: %v", err)
		return 0
	}
	return us
}

// wakeCost returns the median time, in µs, that the close of a channel takes when it
// readies a goroutine parked on it while every other P is idle: the Go runtime then wakes
// an idle P's thread (runtime.wakep) inside the close, before the closing goroutine goes
// on. This is the hand-off that ends every tick of cycled's engine (its runner readies the
// caller), and its cost is the machine's: a futex wake of a thread whose vCPU has gone
// idle, which on a virtual machine whose idle vCPUs halt at once is an inter-processor
// interrupt through the hypervisor. Each of wakeTrials trials sleeps 1 ms and then works
// (reads the clock) for wakeWork before the close, as a tick's runner does: the other
// threads have gone back to sleep by then (right after a sleep the runtime has often woken
// one already).
func wakeCost() float64 {
	us := make([]float64, 0, wakeTrials)
	for range wakeTrials {
		ch := make(chan struct{})
		done := make(chan struct{})
		go func() { <-ch; close(done) }()
		time.Sleep(time.Millisecond)
		for t := time.Now(); time.Since(t) < wakeWork; { // work, as a tick's runner does
		}
		t0 := time.Now()
		close(ch)
		us = append(us, float64(time.Since(t0).Nanoseconds())/1e3)
		<-done
	}
	return stats.Median(us)
}

// The wake-up probe's trials, and the work before each close (see wakeCost).
const (
	wakeTrials = 101
	wakeWork   = 200 * time.Microsecond
)

// cpuSnap is a snapshot of the machine's busy CPU time and of this harness's own (this
// process, its waited-for children and the Python sketch while it runs).
type cpuSnap struct {
	wall time.Time
	busy float64 // seconds, all CPUs, from /proc/stat
	ours float64 // seconds
	load string  // /proc/loadavg, first field
}

// pyPid is the Python sketch's pid while it runs (its CPU counts as ours).
var pyPid int

func clockTicks(fields []string) float64 {
	var sum float64
	for _, f := range fields {
		v, _ := strconv.ParseFloat(f, 64)
		sum += v
	}
	return sum / 100 // USER_HZ
}

func takeCPU() cpuSnap {
	s := cpuSnap{wall: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
		if len(f) >= 9 {
			s.busy = clockTicks(f[1:4]) + clockTicks(f[6:9])
		}
	}
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	s.ours = float64(self.Utime.Nano()+self.Stime.Nano()+kids.Utime.Nano()+kids.Stime.Nano()) / 1e9
	if pyPid > 0 {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pyPid)); err == nil {
			if i := strings.LastIndexByte(string(b), ')'); i > 0 {
				f := strings.Fields(string(b)[i+1:]) // state ppid ... utime(12) stime(13)
				if len(f) > 12 {
					s.ours += clockTicks(f[11:13])
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		s.load = strings.Fields(string(b))[0]
	}
	return s
}

// foreign returns the share (%) of the machine's CPUs that other processes used between a and b.
func foreign(a, b cpuSnap) float64 {
	wall := b.wall.Sub(a.wall).Seconds() * float64(runtime.NumCPU())
	if wall <= 0 {
		return 0
	}
	return max(0, 100*((b.busy-a.busy)-(b.ours-a.ours))/wall)
}
