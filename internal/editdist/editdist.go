// Package editdist measures how far a mistyped name is from a valid one, for the "did you
// mean" hints of the config and rubric decoders.
package editdist

// maxLen bounds the quadratic work on names from untrusted files; longer names are
// never a likely typo of a key.
const maxLen = 64

// Distance is the Damerau–Levenshtein distance (optimal string alignment) between a and
// b, in bytes: "dokcer" is one transposition from "docker". Names longer than 64 bytes
// are maxLen away from everything.
func Distance(a, b string) int {
	if len(a) > maxLen || len(b) > maxLen {
		return maxLen
	}
	prev2 := make([]int, len(b)+1)
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
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
