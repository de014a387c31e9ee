package rtsched

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeThreads is a process's threads as apply sees them: their priorities (0: normal),
// threads that start during a pass, and the errors of the system calls.
type fakeThreads struct {
	prio    map[int]int
	order   []int
	spawn   map[int][]int // a set on this thread starts these threads (inheriting nothing yet)
	setErr  map[int]error
	hasErr  map[int]error
	lists   int
	forever bool // every pass starts a new thread
}

func (f *fakeThreads) list() ([]int, error) {
	f.lists++
	if f.forever {
		tid := 1000 + f.lists
		f.prio[tid] = 0
		f.order = append(f.order, tid)
	}
	return append([]int(nil), f.order...), nil
}

func (f *fakeThreads) set(tid, prio int) error {
	if err := f.setErr[tid]; err != nil {
		return err
	}
	f.prio[tid] = prio
	for _, n := range f.spawn[tid] {
		f.prio[n] = 0
		f.order = append(f.order, n)
	}
	delete(f.spawn, tid)
	return nil
}

func (f *fakeThreads) has(tid, prio int) (bool, error) {
	if err := f.hasErr[tid]; err != nil {
		return false, err
	}
	return f.prio[tid] == prio, nil
}

func TestApplyPasses(t *testing.T) {
	for _, tc := range []struct {
		name        string
		prio        int
		f           fakeThreads
		wantChanged int
		wantLists   int
		wantErr     string // substring; empty: none
		wantIs      error
		wantPrio    map[int]int // after
	}{
		{name: "all threads", prio: 10, f: fakeThreads{prio: map[int]int{1: 0, 2: 0, 3: 0}, order: []int{1, 2, 3}},
			wantChanged: 3, wantLists: 2, wantPrio: map[int]int{1: 10, 2: 10, 3: 10}},
		{name: "already set", prio: 10, f: fakeThreads{prio: map[int]int{1: 10, 2: 10}, order: []int{1, 2}},
			wantChanged: 0, wantLists: 1, wantPrio: map[int]int{1: 10, 2: 10}},
		{name: "other priority changed", prio: 10, f: fakeThreads{prio: map[int]int{1: 5}, order: []int{1}},
			wantChanged: 1, wantLists: 2, wantPrio: map[int]int{1: 10}},
		{name: "thread started during a pass", prio: 1, f: fakeThreads{prio: map[int]int{1: 0, 2: 0}, order: []int{1, 2}, spawn: map[int][]int{2: {7, 8}}},
			wantChanged: 4, wantLists: 3, wantPrio: map[int]int{1: 1, 2: 1, 7: 1, 8: 1}},
		{name: "thread ended before set", prio: 1, f: fakeThreads{prio: map[int]int{1: 0, 2: 0, 3: 0}, order: []int{1, 2, 3}, setErr: map[int]error{2: unix.ESRCH}},
			wantChanged: 2, wantLists: 2, wantPrio: map[int]int{1: 1, 2: 0, 3: 1}},
		{name: "thread ended before get", prio: 1, f: fakeThreads{prio: map[int]int{1: 0, 2: 0}, order: []int{1, 2}, hasErr: map[int]error{2: unix.ESRCH}},
			wantChanged: 1, wantLists: 2, wantPrio: map[int]int{1: 1, 2: 0}},
		{name: "not permitted: nothing changed", prio: 20, f: fakeThreads{prio: map[int]int{1: 0, 2: 0}, order: []int{1, 2}, setErr: map[int]error{1: unix.EPERM}},
			wantChanged: 0, wantLists: 1, wantErr: "set SCHED_FIFO priority 20: operation not permitted (needs CAP_SYS_NICE or an RLIMIT_RTPRIO of at least 20)",
			wantIs: unix.EPERM, wantPrio: map[int]int{1: 0, 2: 0}},
		{name: "other set error names the thread", prio: 3, f: fakeThreads{prio: map[int]int{1: 0, 2: 0}, order: []int{1, 2}, setErr: map[int]error{2: unix.EINVAL}},
			wantChanged: 0, wantLists: 1, wantErr: "set SCHED_FIFO priority 3 on thread 2: invalid argument", wantIs: unix.EINVAL},
		{name: "get error", prio: 3, f: fakeThreads{prio: map[int]int{1: 0}, order: []int{1}, hasErr: map[int]error{1: unix.EACCES}},
			wantLists: 1, wantErr: "scheduling of thread 1: permission denied", wantIs: unix.EACCES},
		{name: "threads keep appearing", prio: 1, f: fakeThreads{prio: map[int]int{}, forever: true},
			wantChanged: maxPasses, wantLists: maxPasses, wantErr: "threads kept appearing after 16 passes"},
		{name: "priority 0", prio: 0, f: fakeThreads{prio: map[int]int{1: 0}, order: []int{1}},
			wantErr: "real-time priority 0 out of range [1, 99]", wantPrio: map[int]int{1: 0}},
		{name: "priority 100", prio: 100, f: fakeThreads{prio: map[int]int{1: 0}, order: []int{1}},
			wantErr: "real-time priority 100 out of range [1, 99]", wantPrio: map[int]int{1: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			n, err := apply(tc.prio, f.list, f.set, f.has)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("apply: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("apply error = %v, want one containing %q", err, tc.wantErr)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.wantIs)
			}
			if n != tc.wantChanged || f.lists != tc.wantLists {
				t.Errorf("changed %d threads in %d passes, want %d in %d", n, f.lists, tc.wantChanged, tc.wantLists)
			}
			for tid, want := range tc.wantPrio {
				if f.prio[tid] != want {
					t.Errorf("thread %d priority %d, want %d", tid, f.prio[tid], want)
				}
			}
		})
	}
}

// childEnv makes the test binary run applyChild instead of the tests.
const childEnv = "RTSCHED_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(applyChild())
	}
	os.Exit(m.Run())
}

// applyChild applies priority 1 to its own process, starts threads after that, and
// prints every thread that is not SCHED_FIFO at 1 (or "not permitted").
func applyChild() int {
	n, err := Apply(1)
	if errors.Is(err, unix.EPERM) {
		fmt.Println("not permitted")
		return 0
	}
	if err != nil {
		fmt.Println("apply:", err)
		return 1
	}
	before, _ := tids()
	// Start threads after Apply: goroutines locked to their threads, all at once.
	var started, release sync.WaitGroup
	release.Add(1)
	for range 8 {
		started.Add(1)
		go func() {
			runtime.LockOSThread()
			started.Done()
			release.Wait()
		}()
	}
	started.Wait()
	after, err := tids()
	defer release.Done()
	if err != nil {
		fmt.Println("threads:", err)
		return 1
	}
	fresh := len(after)
	for _, tid := range after {
		if slices.Contains(before, tid) {
			fresh--
		}
	}
	fmt.Printf("changed %d, started %d\n", n, fresh)
	for _, tid := range after {
		switch ok, err := isFIFO(tid, 1); {
		case errors.Is(err, unix.ESRCH): // the thread ended meanwhile
		case err != nil:
			fmt.Printf("thread %d: %v\n", tid, err)
		case !ok:
			fmt.Printf("thread %d: not SCHED_FIFO at 1\n", tid)
		}
	}
	return 0
}

// TestApplyEveryThread runs Apply in a child process (the test process itself stays under
// the normal policy) and checks that every thread, those started after Apply included,
// runs under SCHED_FIFO. It is skipped where real-time scheduling is not permitted.
func TestApplyEveryThread(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	s := string(out)
	if strings.TrimSpace(s) == "not permitted" {
		t.Skip("real-time scheduling is not permitted here (no CAP_SYS_NICE or RLIMIT_RTPRIO, or no real-time runtime in this cgroup)")
	}
	var changed, started int
	if _, err := fmt.Sscanf(s, "changed %d, started %d", &changed, &started); err != nil {
		t.Fatalf("child output %q: %v", s, err)
	}
	// Eight goroutines locked to their threads need threads of their own: some at least
	// are started after Apply (an idle thread may take one).
	if changed < 1 || started < 1 {
		t.Errorf("changed %d threads, %d started after Apply", changed, started)
	}
	if lines := strings.Split(strings.TrimSpace(s), "\n"); len(lines) > 1 {
		t.Errorf("threads not under SCHED_FIFO 1:\n%s", strings.Join(lines[1:], "\n"))
	}
}
