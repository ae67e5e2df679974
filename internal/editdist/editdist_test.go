package editdist

import (
	"strings"
	"testing"
)

func TestDistance(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 65)
	tests := []struct {
		a, b string
		want int
	}{
		{"docker", "docker", 0},
		{"dokcer", "docker", 1}, // a transposition is one edit
		{"dockr", "docker", 1},
		{"timeuot", "timeout", 1},
		{"", "abc", 3},
		{"kitten", "sitting", 3},
		{long, long, maxLen},
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
