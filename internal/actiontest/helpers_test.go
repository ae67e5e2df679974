package actiontest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// repoRoot is the module root, where action.yml lives.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// need skips the test when tool is not on PATH, or fails it under CI=true, where every
// tool the tests use must be installed (.ci/run installs them).
func need(t *testing.T, tool, install string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not on PATH and CI=true; install it: %s", tool, install)
	}
	t.Skipf("%s is not on PATH; install it to run this test: %s", tool, install)
	return ""
}
