// Package plugintest builds and configures the plugins kept for talkops' tests: a Go
// plugin (providers/plugin/internal/testplugin) and a Python SandboxBackendProtocol class
// (testdata/acme_sandbox) run through the bridge. Only tests import it.
package plugintest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// GoPlugin builds the Go test plugin once per test binary and returns its path.
func GoPlugin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "talkops-testplugin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "testplugin")
		out, err := exec.Command("go", "build", "-o", buildPath, "github.com/talkops/talkops/providers/plugin/internal/testplugin").CombinedOutput()
		if err != nil {
			buildErr = err
			buildPath = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build the Go test plugin: %v\n%s", buildErr, buildPath)
	}
	return buildPath
}

// PythonDir is the directory holding the test backend's Python package (acme_sandbox),
// for PYTHONPATH.
func PythonDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// Python returns the python3 on PATH, skipping the test when there is none (failing it
// under CI=true, where python3 is installed).
func Python(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is not installed (CI installs it)")
		}
		t.Skip("python3 is not installed")
	}
	return p
}

// Alive lists the sandboxes the Go test plugin (or the Python test backend) still keeps
// under root.
func Alive(root string) []string {
	entries, _ := os.ReadDir(filepath.Join(root, "sandboxes"))
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids
}

// LivePIDs returns the plugin processes recorded under root that still run.
func LivePIDs(root string) []int {
	entries, _ := os.ReadDir(filepath.Join(root, "pids"))
	var live []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if syscall.Kill(pid, 0) == nil && !zombie(pid) {
			live = append(live, pid)
		}
	}
	return live
}

// zombie reports whether pid has exited and only waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] == 'Z'
		}
	}
	return false
}
