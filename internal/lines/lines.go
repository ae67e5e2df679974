// Package lines counts the lines of a text the way talkops reports them to the agent and
// the judge, so a file's line count agrees wherever it is shown.
package lines

import "strings"

// Count returns the number of lines in s: a last line without a newline counts, and the
// empty string has none.
func Count(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
