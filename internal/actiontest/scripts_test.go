package actiontest_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeTalkops writes an executable that records its arguments (one per line), the
// environment variables named in show, and any TALKOPS_ACTION_* variable it inherited
// into dir/calls, and exits with code.
func fakeTalkops(t *testing.T, code int, show ...string) (bin, calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	b.WriteString(`for a in "$@"; do printf 'arg %s\n' "$a"; done >>"` + calls + "\"\n")
	for _, name := range show {
		b.WriteString(`[ -z "${` + name + `+x}" ] || printf 'env ` + name + `=%s\n' "$` + name + `" >>"` + calls + "\"\n")
	}
	b.WriteString("env | grep '^TALKOPS_ACTION_' | sed 's/^/leaked /' >>\"" + calls + "\"\n")
	fmt.Fprintf(&b, "exit %d\n", code)
	bin = filepath.Join(dir, "talkops")
	if err := os.WriteFile(bin, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, calls
}

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

func readCalls(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestRunScript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		env       []string
		wantCode  int
		wantCalls []string
		wantOut   string
	}{
		{
			name: "inputs become single arguments",
			env: []string{
				"TALKOPS_ACTION_COMMAND=run",
				"TALKOPS_ACTION_FLAG_RUBRIC=checks.toml",
				"TALKOPS_ACTION_FLAG_SANDBOX_SETUP=-rf ./a b.sh; echo $HOME",
				"TALKOPS_ACTION_FLAG_SANDBOX_ID=",
				"TALKOPS_ACTION_SWITCH_ADVISORY=true",
				"TALKOPS_ACTION_ENV_GITHUB_TOKEN=ghs_x",
				"TALKOPS_ACTION_ARGS=  --log-level=debug\n\n\t--no-sync  \n--output-format=json",
			},
			wantCalls: []string{
				"arg run",
				"arg --rubric=checks.toml",
				"arg --sandbox-setup=-rf ./a b.sh; echo $HOME",
				"arg --advisory",
				"arg --log-level=debug",
				"arg --no-sync",
				"arg --output-format=json",
				"env GITHUB_TOKEN=ghs_x",
			},
		},
		{
			name: "an empty input hides nothing the job set",
			env: []string{
				"TALKOPS_ACTION_COMMAND=report",
				"TALKOPS_ACTION_FLAG_FROM=out/result.json",
				"TALKOPS_ACTION_SWITCH_ADVISORY=false",
				"TALKOPS_ACTION_ENV_GITHUB_TOKEN=",
				"GITHUB_TOKEN=from-the-job",
			},
			wantCalls: []string{"arg report", "arg --from=out/result.json", "env GITHUB_TOKEN=from-the-job"},
		},
		{
			name:     "a switch must be true or false",
			env:      []string{"TALKOPS_ACTION_SWITCH_ADVISORY=yes"},
			wantCode: 2,
			wantOut:  `::error title=talkops::the input that sets --advisory must be true or false, got "yes"`,
		},
		{
			name:     "unknown command",
			env:      []string{"TALKOPS_ACTION_COMMAND=rm"},
			wantCode: 2,
			wantOut:  `unknown command "rm"`,
		},
		{
			name:     "the exit code is talkops's",
			env:      []string{"TALKOPS_ACTION_FLAG_RUBRIC=x"},
			wantCode: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code := 0
			if tt.wantCode == 1 {
				code = 1
			}
			bin, calls := fakeTalkops(t, code, "GITHUB_TOKEN")
			env := append([]string{"PATH=" + os.Getenv("PATH"), "TALKOPS_ACTION_BIN=" + bin}, tt.env...)
			gotCode, out := script(t, "run.sh", env)
			if gotCode != tt.wantCode {
				t.Fatalf("run.sh exit %d, want %d; output:\n%s", gotCode, tt.wantCode, out)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("run.sh output %q, want it to contain %q", out, tt.wantOut)
			}
			if tt.wantCalls != nil {
				if diff := cmp.Diff(tt.wantCalls, readCalls(t, calls)); diff != "" {
					t.Errorf("talkops saw (-want +got):\n%s", diff)
				}
			}
		})
	}

	t.Run("no binary", func(t *testing.T) {
		t.Parallel()
		code, out := script(t, "run.sh", []string{"PATH=" + os.Getenv("PATH")})
		if code != 2 || !strings.Contains(out, "the install step did not run or failed") {
			t.Errorf("run.sh without a binary: exit %d, %q", code, out)
		}
	})
}

func TestReapScript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		sandbox   string
		exit      int
		noBin     bool
		wantCalls []string
		wantOut   string
	}{
		{name: "configured default: every provider", wantCalls: []string{"arg sandbox", "arg gc", "arg --older-than=0s"}},
		{name: "one provider", sandbox: "docker", wantCalls: []string{"arg sandbox", "arg gc", "arg --older-than=0s", "arg --provider=docker"}},
		{name: "local creates nothing", sandbox: "local", wantOut: "nothing to reap"},
		{name: "not installed", noBin: true, wantOut: "talkops was not installed"},
		{name: "a failed sweep warns", sandbox: "bwrap", exit: 3, wantCalls: []string{"arg sandbox", "arg gc", "arg --older-than=0s", "arg --provider=bwrap"}, wantOut: "::warning title=talkops reap::"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bin, calls := fakeTalkops(t, tt.exit)
			env := []string{"PATH=" + os.Getenv("PATH"), "TALKOPS_ACTION_SANDBOX=" + tt.sandbox}
			if !tt.noBin {
				env = append(env, "TALKOPS_ACTION_BIN="+bin)
			}
			code, out := script(t, "reap.sh", env)
			if code != 0 {
				t.Errorf("reap.sh exit %d, want 0 (a sweep never fails the job); output:\n%s", code, out)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("reap.sh output %q, want it to contain %q", out, tt.wantOut)
			}
			if diff := cmp.Diff(tt.wantCalls, readCalls(t, calls)); diff != "" {
				t.Errorf("talkops saw (-want +got):\n%s", diff)
			}
		})
	}
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
