package strictdecode

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
