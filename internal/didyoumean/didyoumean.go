// Package didyoumean finds the name a misspelled one is probably a typo of: the one home
// of the suggestions for configuration keys, tier, breaker, bulkhead and retry-budget
// names, and the simulator's scenario names.
package didyoumean

import "fmt"

// Suggest returns the candidate closest to s when it is close enough to be a typo (at most
// two edits away), or "".
func Suggest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if dd := levenshtein(s, c); dd < bestD {
			best, bestD = c, dd
		}
	}
	return best
}

// levenshtein is the edit distance between a and b; long strings are never typos of a key.
func levenshtein(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Hint returns ` (did you mean "x"?)` for the candidate s is probably a typo of, or "",
// to append to a message that names s as unknown.
func Hint(s string, candidates []string) string {
	if m := Suggest(s, candidates); m != "" {
		return fmt.Sprintf(" (did you mean %q?)", m)
	}
	return ""
}

// HintOr returns Hint(s, candidates) when there is a suggestion, else " (otherwise)": for
// a message that says what to do when s is no typo ("declare it under breakers").
func HintOr(s string, candidates []string, otherwise string) string {
	if h := Hint(s, candidates); h != "" {
		return h
	}
	return " (" + otherwise + ")"
}
