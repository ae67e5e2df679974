package config

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEListsTrustedOnlyKeys keeps README's list of trusted-only keys in step with
// the key table.
func TestREADMEListsTrustedOnlyKeys(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "### Trust: what the project's own config may set")
	if !ok {
		t.Fatal("README.md has no trust section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, k := range Keys() {
		listed := strings.Contains(section, "- `"+k.Name+"`") || strings.Contains(section, "`"+k.Name+"` and") ||
			strings.Contains(section, "and `"+k.Name+"`")
		if (k.Trust != Safe) != listed {
			t.Errorf("%s is %v, but README's trusted-only list %s it", k.Name, k.Trust, map[bool]string{true: "has", false: "lacks"}[listed])
		}
	}
}
