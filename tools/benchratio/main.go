// Command benchratio turns `go test -bench` output (several -count repetitions) into the
// markdown table of BENCHMARKS.md: for every case that both an engine benchmark and its
// baseline ran, the median of each metric and the median of the per-repetition ratios.
//
// Usage: go test -run '^$' -bench 'Tick|Baseline' -benchmem -count 5 ./cycle | go run ./tools/benchratio
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var line = regexp.MustCompile(`^Benchmark(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

func main() {
	engine := flag.String("engine", "Tick", "benchmark name of the engine")
	base := flag.String("baseline", "BaselineGoroutinePerModule", "benchmark name of the baseline")
	flag.Parse()

	// runs[name][case] = list of metric maps, in order of appearance (one per repetition).
	runs := map[string]map[string][]map[string]float64{}
	var cases []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name, c, _ := strings.Cut(m[1], "/")
		f := strings.Fields(m[3])
		metrics := map[string]float64{}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				metrics[f[i+1]] = v
			}
		}
		if runs[name] == nil {
			runs[name] = map[string][]map[string]float64{}
		}
		runs[name][c] = append(runs[name][c], metrics)
		if !seen[c] {
			seen[c] = true
			cases = append(cases, c)
		}
	}
	fmt.Println("| case | engine ns/tick | baseline ns/tick | engine/baseline (median of per-run ratios) | engine allocs/tick | baseline allocs/tick | engine B/tick | baseline B/tick |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range cases {
		e, b := runs[*engine][c], runs[*base][c]
		if len(e) == 0 || len(b) == 0 {
			continue
		}
		n := min(len(e), len(b))
		var ratios []float64
		for i := 0; i < n; i++ {
			ratios = append(ratios, e[i]["ns/op"]/b[i]["ns/op"])
		}
		fmt.Printf("| %s | %.0f | %.0f | **%.2f×** (n=%d) | %.0f | %.0f | %.0f | %.0f |\n", c,
			median(e, "ns/op"), median(b, "ns/op"), med(ratios), n,
			median(e, "allocs/op"), median(b, "allocs/op"), median(e, "B/op"), median(b, "B/op"))
	}
}

func median(ms []map[string]float64, k string) float64 {
	var xs []float64
	for _, m := range ms {
		xs = append(xs, m[k])
	}
	return med(xs)
}

func med(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
