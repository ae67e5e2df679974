package safename

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestValidMatchesRegexp checks Valid against the regexp it replaces, on names built from
// every interesting byte at the first, middle and last position and at the length bounds.
func TestValidMatchesRegexp(t *testing.T) {
	for _, maxLen := range []int{1, 2, 63, 64, 81} {
		re := regexp.MustCompile(fmt.Sprintf(`^[A-Za-z0-9][A-Za-z0-9._-]{0,%d}$`, maxLen-1))
		var names []string
		for _, n := range []int{0, 1, 2, maxLen - 1, maxLen, maxLen + 1} {
			if n >= 0 {
				names = append(names, strings.Repeat("a", n))
			}
		}
		for c := 0; c < 256; c++ {
			b := string([]byte{byte(c)})
			names = append(names, b, b+"a", "a"+b, "a"+b+"z", strings.Repeat("x", max(maxLen-1, 0))+b)
		}
		names = append(names, "é", "aé", "a\u00e9b", "a\nb", "a\n", "run-1.2_3", "\xff\xfe")
		for _, s := range names {
			if got, want := Valid(s, maxLen), re.MatchString(s); got != want {
				t.Errorf("Valid(%q, %d) = %v, the regexp says %v", s, maxLen, got, want)
			}
		}
	}
}

// BenchmarkCompileRegexp is what each package paid at start-up before Valid.
func BenchmarkCompileRegexp(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	}
}

func BenchmarkValid(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Valid("20260102T150405Z-0a1b2c3d", 64)
	}
}
