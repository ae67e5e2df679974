package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers/contract"
	"github.com/talkops/talkops/providers/plugin/plugintest"
)

// pluginEnv is a hermetic environment whose user config (~/.talkops/config.toml)
// defines the custom provider acme with table (the lines after the header).
func pluginUserEnv(t *testing.T, table string) (env map[string]string, root string) {
	t.Helper()
	root = t.TempDir()
	env = testEnv(t, map[string]string{"PYTHONPATH": plugintest.PythonDir(), "PYTHONDONTWRITEBYTECODE": "1"})
	cfg := "[sandboxes.providers.acme]\n" + strings.ReplaceAll(table, "$ROOT", root)
	p := filepath.Join(env["HOME"], ".talkops", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return env, root
}

const pythonAcme = `backend = "acme_sandbox.backend:AcmeSandboxBackend"
[sandboxes.providers.acme.options]
root = "$ROOT"
region = "eu-west-1"
`

// TestPluginSandboxEndToEnd runs the pipeline with --sandbox acme from the user config,
// once with the seeds' Python backend class through the bridge and once with a Go plugin
// executable: the workspace is synced in, the checks run there, the sandbox is deleted
// and no plugin process is left.
func TestPluginSandboxEndToEnd(t *testing.T) {
	t.Parallel()
	goPlugin := plugintest.GoPlugin(t)
	tests := []struct {
		name, table string
		args        []string
	}{
		{name: "python backend", table: pythonAcme, args: []string{"--sandbox", "acme"}},
		{name: "go plugin", table: fmt.Sprintf("command = [%q]\noptions = { root = \"$ROOT\" }\n", goPlugin), args: []string{"--sandbox", "acme"}},
		{name: "default from user config", table: pythonAcme, args: []string{"--sandbox"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if strings.Contains(tc.table, "backend") {
				plugintest.Python(t)
			}
			env, root := pluginUserEnv(t, tc.table)
			if tc.args[len(tc.args)-1] == "--sandbox" {
				p := filepath.Join(env["HOME"], ".talkops", "config.toml")
				b, _ := os.ReadFile(p)
				if err := os.WriteFile(p, append([]byte("[sandboxes]\ndefault = \"acme\"\n"), b...), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dir := project(t, map[string]string{"r.toml": passRubric, "README.md": "hello\n", "setup.sh": "echo set up in $(pwd)\n"})
			args := append(append([]string{}, tc.args...), "--sandbox-setup", "setup.sh", "--rubric", "r.toml")
			got := runIn(t, dir, env, args...)
			if got.code != 0 {
				t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
			}
			r := readResult(t, dir)
			if r.Sandbox == nil || r.Sandbox.Provider != "acme" {
				t.Errorf("result.json sandbox = %+v, want provider acme", r.Sandbox)
			}
			if ids := plugintest.Alive(root); len(ids) > 0 {
				t.Errorf("sandboxes left after the run: %v", ids)
			}
			if pids := plugintest.LivePIDs(root); len(pids) > 0 {
				t.Errorf("plugin processes left after the run: %v", pids)
			}
			if entries := stateEntries(t, env); len(entries) > 0 {
				t.Errorf("state file entries %v, want none", entries)
			}
		})
	}
}

// TestPluginFaultsThroughCLI injects plugin faults into a run: each is exit 3 with the
// plugin's stderr in result.json's reason, teardown still runs, and no plugin process is
// left. A plugin that cannot delete leaves its sandbox in the ledger for `sandbox gc`.
func TestPluginFaultsThroughCLI(t *testing.T) {
	t.Parallel()
	goPlugin := plugintest.GoPlugin(t)
	tests := []struct {
		fault  string
		reason string
		leaked int
	}{
		{fault: "version", reason: "protocol version 99"},
		{fault: "crash:create", reason: "crashing in create"},
		{fault: "hang:create", reason: "did not answer within 5s"},
		{fault: "crash:upload_begin", reason: "crashing in upload_begin"},
		{fault: "hang:upload_chunk", reason: "hanging in upload_chunk"},
		{fault: "crash:exec", reason: "crashing in exec"},
		{fault: "garbage:exec", reason: "not a protocol message"},
		{fault: "huge:exec", reason: "longer than 16 MiB"},
		{fault: "crash:delete", reason: "crashing in delete", leaked: 1},
	}
	for _, tc := range tests {
		t.Run(tc.fault, func(t *testing.T) {
			t.Parallel()
			env, root := pluginUserEnv(t, fmt.Sprintf("command = [%q]\ncreate_timeout = \"5s\"\ncall_timeout = \"10s\"\noptions = { root = \"$ROOT\", fault = %q }\n", goPlugin, tc.fault))
			dir := project(t, map[string]string{"r.toml": passRubric, "README.md": "hello\n", "setup.sh": "echo ok\n"})
			got := runIn(t, dir, env, "--sandbox", "acme", "--sandbox-setup", "setup.sh", "--rubric", "r.toml")
			if got.code != 3 {
				t.Fatalf("exit %d, want 3\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
			}
			r := readResult(t, dir)
			if !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("result.json reason %q does not say %q", r.Reason, tc.reason)
			}
			if ids := plugintest.Alive(root); len(ids) != tc.leaked {
				t.Errorf("sandboxes left after the run: %v, want %d", ids, tc.leaked)
			}
			if entries := stateEntries(t, env); len(entries) != tc.leaked {
				t.Errorf("state file entries %v, want %d (only what could not be deleted)", entries, tc.leaked)
			}
			if pids := plugintest.LivePIDs(root); len(pids) > 0 {
				t.Errorf("plugin processes left after the run: %v", pids)
			}
		})
	}
}

// TestPluginConfigErrors: a project config cannot point talkops at an executable, and an
// unknown --sandbox lists the built-in and the configured providers.
func TestPluginConfigErrors(t *testing.T) {
	t.Parallel()
	env, _ := pluginUserEnv(t, pythonAcme)
	dir := project(t, map[string]string{"r.toml": passRubric,
		".talkops/config.toml": "[sandboxes.providers.evil]\ncommand = [\"/bin/sh\", \"-c\", \"touch pwned\"]\n"})
	got := runIn(t, dir, env, "--sandbox", "evil", "--rubric", "r.toml")
	if got.code != 2 || !strings.Contains(got.stderr, "sandboxes.providers.evil.command is trusted-only") {
		t.Errorf("project plugin: exit %d, stderr %q; want 2 and trusted-only", got.code, got.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("the project's command ran")
	}
	dir = project(t, map[string]string{"r.toml": passRubric})
	got = runIn(t, dir, env, "--sandbox=acme2", "--rubric", "r.toml")
	if got.code != 2 || !strings.Contains(got.stderr, `unknown provider "acme2"`) || !strings.Contains(got.stderr, "local") || !strings.Contains(got.stderr, "acme)") {
		t.Errorf("unknown provider: exit %d, stderr %q; want 2 listing the built-ins and acme", got.code, got.stderr)
	}
}

// TestPluginSandboxGC: `talkops sandbox gc` reaps through a plugin that can list: a
// sandbox a killed run left behind (past its expiry) is found by its labels and deleted.
func TestPluginSandboxGC(t *testing.T) {
	t.Parallel()
	env, root := pluginUserEnv(t, fmt.Sprintf("command = [%q]\noptions = { root = \"$ROOT\" }\n", plugintest.GoPlugin(t)))
	// What the Go test plugin keeps for a sandbox, as a SIGKILLed run would leave it.
	orphan := filepath.Join(root, "sandboxes", "sb-orphan")
	if err := os.MkdirAll(filepath.Join(orphan, "fs", "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	meta := `{"id":"sb-orphan","created_at":"2026-01-01T00:00:00Z","labels":{"talkops.created-by":"talkops","talkops.run-id":"r-dead","talkops.expires-at":"2026-01-01T01:00:00Z"}}`
	if err := os.WriteFile(filepath.Join(orphan, "meta.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := project(t, nil)
	if ls := sandboxList(t, dir, env, "acme", "r-dead"); len(ls) != 1 || ls[0].ID != "sb-orphan" {
		t.Fatalf("sandbox ls through the plugin = %+v, want sb-orphan", ls)
	}
	got := runIn(t, dir, env, "sandbox", "gc", "--provider", "acme")
	if got.code != 0 {
		t.Fatalf("sandbox gc: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	if ids := plugintest.Alive(root); len(ids) > 0 {
		t.Errorf("sandboxes left after gc: %v\n%s", ids, got.stdout)
	}
	if pids := plugintest.LivePIDs(root); len(pids) > 0 {
		t.Errorf("plugin processes left after gc: %v", pids)
	}
}

// TestProviderTestCommand: `talkops provider test` runs the contract checks against a
// configured plugin and prints which guarantees hold; a broken plugin fails (exit 1)
// with the failing checks named.
func TestProviderTestCommand(t *testing.T) {
	t.Parallel()
	goPlugin := plugintest.GoPlugin(t)
	t.Run("all hold", func(t *testing.T) {
		t.Parallel()
		env, root := pluginUserEnv(t, fmt.Sprintf("command = [%q]\noptions = { root = \"$ROOT\" }\n", goPlugin))
		got := runIn(t, project(t, nil), env, "provider", "test", "acme")
		if got.code != 0 {
			t.Fatalf("exit %d, want 0\n%s%s", got.code, got.stdout, got.stderr)
		}
		n := len(contract.Cases())
		for _, want := range []string{"PASS  ProvisionClose", "PASS  NoLeaks", fmt.Sprintf("%d of %d guarantees hold for acme", n, n)} {
			if !strings.Contains(got.stdout, want) {
				t.Errorf("output does not contain %q:\n%s", want, got.stdout)
			}
		}
		if pids := plugintest.LivePIDs(root); len(pids) > 0 {
			t.Errorf("plugin processes left: %v", pids)
		}
	})
	t.Run("broken exec", func(t *testing.T) {
		t.Parallel()
		env, _ := pluginUserEnv(t, fmt.Sprintf("command = [%q]\noptions = { root = \"$ROOT\", fault = \"crash:exec\" }\n", goPlugin))
		got := runIn(t, project(t, nil), env, "provider", "test", "acme", "--only", "CloseTwice,ExecEcho")
		if got.code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", got.code, got.stdout, got.stderr)
		}
		for _, want := range []string{"PASS  CloseTwice", "FAIL  ExecEcho", "crashing in exec", "1 of 2 guarantees hold for acme"} {
			if !strings.Contains(got.stdout, want) {
				t.Errorf("output does not contain %q:\n%s", want, got.stdout)
			}
		}
	})
	t.Run("unknown check", func(t *testing.T) {
		t.Parallel()
		env, _ := pluginUserEnv(t, pythonAcme)
		got := runIn(t, project(t, nil), env, "provider", "test", "acme", "--only", "Nope")
		if got.code != 2 || !strings.Contains(got.stderr, `unknown check "Nope"`) {
			t.Errorf("exit %d, stderr %q; want 2 naming the unknown check", got.code, got.stderr)
		}
	})
}

// TestEntryPointProviders: a provider an installed Python package registers by entry
// point is found by name, with no config (talkops.sandbox_providers) or with only its
// options configured (deepagents_code.sandbox_providers), and runs the pipeline.
func TestEntryPointProviders(t *testing.T) {
	t.Parallel()
	plugintest.Python(t)
	t.Run("talkops group, no config", func(t *testing.T) {
		t.Parallel()
		env := testEnv(t, map[string]string{"PYTHONPATH": plugintest.PythonDir(), "PYTHONDONTWRITEBYTECODE": "1"})
		root := filepath.Join(env["HOME"], "acme-root")
		dir := project(t, map[string]string{"r.toml": passRubric, "README.md": "hello\n"})
		got := runIn(t, dir, env, "--sandbox=acmeep", "--rubric", "r.toml")
		if got.code != 0 {
			t.Fatalf("exit %d, want 0\n%s%s", got.code, got.stdout, got.stderr)
		}
		if ids := plugintest.Alive(root); len(ids) > 0 {
			t.Errorf("sandboxes left: %v", ids)
		}
		if pids := plugintest.LivePIDs(root); len(pids) > 0 {
			t.Errorf("bridge processes left: %v", pids)
		}
	})
	t.Run("deepagents group, options in config", func(t *testing.T) {
		t.Parallel()
		env, root := pluginUserEnv(t, "")
		p := filepath.Join(env["HOME"], ".talkops", "config.toml")
		if err := os.WriteFile(p, []byte("[sandboxes.providers.acmedc.options]\nroot = \""+root+"\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := project(t, map[string]string{"r.toml": passRubric, "README.md": "hello\n"})
		got := runIn(t, dir, env, "--sandbox", "acmedc", "--rubric", "r.toml")
		if got.code != 0 {
			t.Fatalf("exit %d, want 0\n%s%s", got.code, got.stdout, got.stderr)
		}
		if ids := plugintest.Alive(root); len(ids) > 0 {
			t.Errorf("sandboxes left: %v", ids)
		}
	})
	t.Run("unknown name still lists the valid ones", func(t *testing.T) {
		t.Parallel()
		env := testEnv(t, map[string]string{"PYTHONPATH": plugintest.PythonDir(), "PYTHONDONTWRITEBYTECODE": "1"})
		got := runIn(t, project(t, map[string]string{"r.toml": passRubric}), env, "--sandbox=nope", "--rubric", "r.toml")
		if got.code != 2 || !strings.Contains(got.stderr, `unknown provider "nope"`) {
			t.Errorf("exit %d, stderr %q; want 2 and unknown provider", got.code, got.stderr)
		}
	})
}

// TestPluginCommandRelativePath: a relative plugin path would run a program the project
// (a pull request) provides; it is a usage error naming the key.
func TestPluginCommandRelativePath(t *testing.T) {
	t.Parallel()
	env, _ := pluginUserEnv(t, "command = [\"./plugin.sh\"]\n")
	dir := project(t, map[string]string{"r.toml": passRubric, "plugin.sh": "touch pwned\n"})
	got := runIn(t, dir, env, "--sandbox", "acme", "--rubric", "r.toml")
	if got.code != 2 || !strings.Contains(got.stderr, "sandboxes.providers.acme.command") || !strings.Contains(got.stderr, "relative path") {
		t.Errorf("exit %d, stderr %q; want 2 naming sandboxes.providers.acme.command", got.code, got.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("the project's plugin.sh ran")
	}
}

// TestPluginSignals: a real talkops process running a plugin sandbox is stopped during
// the setup script. SIGTERM tears down through the plugin (exit 143, the command and the
// plugin gone); SIGKILL leaves the sandbox, the plugin exits on its closed stdin, and
// `talkops sandbox gc` reaps the sandbox through the plugin.
func TestPluginSignals(t *testing.T) {
	t.Parallel()
	goPlugin := plugintest.GoPlugin(t)
	tests := []struct {
		name, table string
		sig         syscall.Signal
	}{
		{name: "SIGTERM go plugin", table: fmt.Sprintf("command = [%q]\noptions = { root = \"$ROOT\" }\n", goPlugin), sig: syscall.SIGTERM},
		{name: "SIGTERM python backend", table: pythonAcme, sig: syscall.SIGTERM},
		{name: "SIGKILL go plugin", table: fmt.Sprintf("command = [%q]\noptions = { root = \"$ROOT\" }\n", goPlugin), sig: syscall.SIGKILL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if strings.Contains(tc.table, "backend") {
				plugintest.Python(t)
			}
			env, root := pluginUserEnv(t, tc.table)
			pidFile := filepath.Join(t.TempDir(), "work.pid")
			dir := project(t, map[string]string{"r.toml": passRubric, "README.md": "hi\n",
				"setup.sh": "echo $$ > " + pidFile + "\nsleep 30\n"})
			cmd, out := startTalkops(t, dir, env, "--sandbox", "acme", "--sandbox-setup", "setup.sh", "--rubric", "r.toml")
			pid, err := strconv.Atoi(waitFile(t, pidFile, 30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code := waitExit(t, cmd, 20*time.Second)
			if tc.sig == syscall.SIGKILL {
				waitFor(t, 10*time.Second, func() bool { return len(plugintest.LivePIDs(root)) == 0 })
				if ids := plugintest.Alive(root); len(ids) != 1 {
					t.Fatalf("sandboxes after SIGKILL: %v, want the one the run left", ids)
				}
				got := runIn(t, dir, env, "sandbox", "gc", "--provider", "acme", "--older-than", "0s")
				if got.code != 0 {
					t.Fatalf("sandbox gc: exit %d\n%s%s", got.code, got.stdout, got.stderr)
				}
			} else if code != 143 {
				t.Fatalf("exit %d, want 143\n%s", code, out)
			}
			waitFor(t, 5*time.Second, func() bool { return processGone(pid) })
			if ids := plugintest.Alive(root); len(ids) > 0 {
				t.Errorf("sandboxes left: %v\n%s", ids, out)
			}
			if pids := plugintest.LivePIDs(root); len(pids) > 0 {
				t.Errorf("plugin processes left: %v", pids)
			}
		})
	}
}

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("condition not met within %s", limit)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
