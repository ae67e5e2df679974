package actiontest_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// script runs one of the action's scripts with exactly env.
func script(t *testing.T, name string, env []string) (code int, out string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(repoRoot(t), ".github", "action", name))
	cmd.Env = env
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run %s: %v", name, err)
	}
	return code, buf.String()
}

// TestBwrapScript runs bwrap.sh against stub bwrap and sudo commands on a PATH that has
// nothing else of the host's (so the real sudo and apt-get are never touched).
func TestBwrapScript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		stubs    map[string]string
		wantCode int
		wantOut  string
	}{
		{
			name:    "already works",
			stubs:   map[string]string{"bwrap": `[ "$1" = --version ] && echo "bubblewrap 0.9.0"; exit 0`},
			wantOut: "bubblewrap works: bubblewrap 0.9.0",
		},
		{
			name:     "blocked, no sudo",
			stubs:    map[string]string{"bwrap": `echo "bwrap: setting up uid map: Permission denied" >&2; exit 1`, "sudo": "exit 1"},
			wantCode: 1,
			wantOut:  "setting up uid map: Permission denied",
		},
		{
			name:     "missing, no sudo",
			stubs:    map[string]string{"sudo": "exit 1"},
			wantCode: 1,
			wantOut:  "bwrap is not installed and there is no passwordless sudo",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, tool := range []string{"bash", "mktemp", "rm", "tr", "cat", "readlink"} {
				p, err := exec.LookPath(tool)
				if err != nil {
					t.Skipf("%s: %v", tool, err)
				}
				if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
					t.Fatal(err)
				}
			}
			for name, body := range tt.stubs {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("#!"+filepath.Join(dir, "bash")+"\n"+body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			code, out := script(t, "bwrap.sh", []string{"PATH=" + dir})
			if code != tt.wantCode || !strings.Contains(out, tt.wantOut) {
				t.Errorf("bwrap.sh: exit %d, output %q; want exit %d and %q", code, out, tt.wantCode, tt.wantOut)
			}
		})
	}
}
