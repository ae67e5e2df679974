package main

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/agent/mcp/mcptest"
	"github.com/talkops/talkops/agent/model/modeltest"
)

// Values the MCP tests plant: the header and env secrets must never show up in an output.
const (
	mcpHeaderToken = "hdr-CANARY-4f1d9e2a7b"
	mcpEnvToken    = "env-CANARY-9c3e1b7d55"
	mcpHostSecret  = "host-CANARY-a1b2c3d4e5"
)

// buildMCPServer builds the stdio test server as a static binary into dir, so it runs in
// a busybox container and a bwrap sandbox as well as on the host.
func buildMCPServer(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", filepath.Join(dir, "mcpserver"), "github.com/talkops/talkops/agent/mcp/mcptest/mcpserver")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the MCP test server: %v\n%s", err, out)
	}
}

// mcpSandboxArgs returns the flags that run on provider and adds what it needs to env,
// skipping (or failing under CI) when it is not available here.
func mcpSandboxArgs(t *testing.T, provider string, env map[string]string) []string {
	t.Helper()
	need := func(ok bool, why string) {
		if ok {
			return
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI: %s", provider, why)
		}
		t.Skipf("%s is not available: %s", provider, why)
	}
	switch provider {
	case "bwrap":
		err := exec.Command("bwrap", "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true").Run()
		need(err == nil, fmt.Sprint(err))
	case "docker":
		img := os.Getenv("TALKOPS_TEST_DOCKER_IMAGE")
		need(img != "" && os.Getenv("DOCKER_HOST") != "", "set DOCKER_HOST and TALKOPS_TEST_DOCKER_IMAGE")
		env["DOCKER_HOST"] = os.Getenv("DOCKER_HOST")
		return []string{"--sandbox", "docker", "--sandbox-snapshot-name", img}
	}
	return []string{"--sandbox", provider}
}

func randomTag(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "mcptag-" + hex.EncodeToString(b[:])
}

// processesWith lists the host processes whose command line holds tag.
func processesWith(tag string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), tag) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

// writeUserConfig writes ~/.talkops/config.toml in env's HOME.
func writeUserConfig(t *testing.T, env map[string]string, content string) {
	t.Helper()
	p := filepath.Join(env["HOME"], ".talkops", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mcpConfigFile writes the --mcp-config JSON for the stdio server "tools".
func mcpConfigFile(t *testing.T, tag string, extraEnv map[string]string) string {
	t.Helper()
	env := map[string]string{"SERVER_TOKEN": "${MCP_TEST_ENV_TOKEN}"}
	for k, v := range extraEnv {
		env[k] = v
	}
	doc := map[string]any{"mcpServers": map[string]any{
		"tools": map[string]any{"command": "./mcpserver", "args": []string{tag}, "env": env},
	}}
	data, _ := json.Marshal(doc)
	p := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// agentScript answers the agent's calls in order and the judge's with a pass.
func agentScript(steps []modeltest.Step) (modeltest.Responder, *atomic.Int32) {
	var n atomic.Int32
	return func(c modeltest.Call) modeltest.Step {
		if isJudge(c) {
			return verdict(c, true, "")
		}
		i := int(n.Add(1)) - 1
		if i < len(steps) {
			return steps[i]
		}
		return modeltest.Step{Text: "done"}
	}, &n
}

// TestMCPToolsEndToEnd drives MCP tools through a real talkops process on each sandbox
// provider: a stdio server in the sandbox and a streamable-HTTP server from the host. The
// calls' results reach the model and the judge's evidence; a hanging call and a crashing
// server are errors naming the server while the run goes on; env and header secrets are
// redacted everywhere; nothing is left running afterwards.
func TestMCPToolsEndToEnd(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"local", "bwrap", "docker"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			tag := randomTag(t)
			web := httptest.NewServer(mcptest.Handler("Bearer " + mcpHeaderToken))
			t.Cleanup(web.Close)

			respond, _ := agentScript([]modeltest.Step{
				{ToolCalls: []modeltest.ToolCall{toolCall("mcp__tools__echo", `{"text":"hello from the model"}`)}},
				{ToolCalls: []modeltest.ToolCall{toolCall("mcp__web__whoami", `{}`)}},
				{ToolCalls: []modeltest.ToolCall{toolCall("mcp__tools__hang", `{}`)}},
				{ToolCalls: []modeltest.ToolCall{toolCall("mcp__tools__crash", `{}`)}},
				{ToolCalls: []modeltest.ToolCall{toolCall("mcp__tools__echo", `{"text":"again"}`)}},
				{ToolCalls: []modeltest.ToolCall{toolCall("mcp__web__big", `{"bytes":50000}`)}},
				{Text: "All MCP calls made."},
			})
			srv := modeltest.NewServerFunc(respond)
			t.Cleanup(srv.Close)

			dir := project(t, map[string]string{"marker.txt": "inside-workspace\n", "README.md": "x\n"})
			buildMCPServer(t, dir)
			env := testEnv(t, map[string]string{
				"ANTHROPIC_API_KEY":  canaryKey,
				"MCP_TEST_ENV_TOKEN": mcpEnvToken,
				"MCP_TEST_HDR_TOKEN": mcpHeaderToken,
				"MCP_HOST_SECRET":    mcpHostSecret,
			})
			sandboxArgs := mcpSandboxArgs(t, provider, env)
			writeUserConfig(t, env, fmt.Sprintf(`
[agent]
tool_timeout = "3s"

[sandboxes.sync]
max_file_size = "64MiB"

[mcp.servers.web]
url = %q
headers = { Authorization = "Bearer ${MCP_TEST_HDR_TOKEN}" }
`, web.URL+"/mcp"))
			args := append([]string{"-p", "use the MCP tools", "-y", "--model", "anthropic:claude-test", "--base-url", srv.URL,
				"--mcp-config", mcpConfigFile(t, tag, nil), "--rubric", "the agent used the MCP tools", "--output-format", "stream-json"}, sandboxArgs...)
			cmd, out := startTalkops(t, dir, env, args...)
			code := waitExit(t, cmd, 3*time.Minute)
			if code != 0 {
				t.Fatalf("exit %d, want 0\n%s", code, out)
			}
			if left := processesWith(tag); len(left) > 0 {
				t.Errorf("MCP server processes left after teardown:\n%s", strings.Join(left, "\n"))
			}

			// What the model saw, call by call.
			var agentBodies []string
			var judgeBody string
			for _, c := range srv.Calls() {
				if isJudge(c) {
					judgeBody = string(c.Body)
				} else {
					agentBodies = append(agentBodies, string(c.Body))
				}
			}
			if len(agentBodies) < 7 {
				t.Fatalf("the model was called %d times, want 7", len(agentBodies))
			}
			first := agentBodies[0]
			for _, tool := range []string{"mcp__tools__echo", "mcp__tools__hang", "mcp__web__whoami"} {
				if !strings.Contains(first, `"name":"`+tool+`"`) {
					t.Errorf("the model was not offered %s", tool)
				}
			}
			echo := agentBodies[1]
			if !strings.Contains(echo, "echo: hello from the model") || !strings.Contains(echo, "marker=inside-workspace") {
				t.Errorf("the echo result did not reach the model from the workspace:\n%s", echo)
			}
			if !strings.Contains(echo, `server_token=***`) || !strings.Contains(echo, `host_secret=\n`) {
				t.Errorf("the stdio server must get its configured env (redacted for the model) and nothing else of talkops's environment:\n%s", echo)
			}
			if !strings.Contains(agentBodies[2], "authorization=***") {
				t.Errorf("the HTTP server did not get the header, or it reached the model unredacted:\n%s", agentBodies[2])
			}
			if b := agentBodies[3]; !strings.Contains(b, `MCP server \"tools\" did not answer hang within 3s`) {
				t.Errorf("the hanging call's result does not name the server:\n%s", b)
			}
			if b := agentBodies[4]; !strings.Contains(b, `MCP server \"tools\" stopped while running crash`) || !strings.Contains(b, "crashing now") {
				t.Errorf("the crash's result does not name the server with its stderr:\n%s", b)
			}
			if b := agentBodies[5]; !strings.Contains(b, `MCP server \"tools\"`) {
				t.Errorf("a call to the dead server does not name it:\n%s", b)
			}
			if b := agentBodies[6]; !strings.Contains(b, "of 50000 bytes omitted here") || !strings.Contains(b, "tool-outputs/6.txt") {
				t.Errorf("a long MCP result must reach the model cut, with the whole of it saved:\n%.2000s", b)
			}
			if !strings.Contains(judgeBody, "mcp__tools__echo") || !strings.Contains(judgeBody, "echo: hello from the model") {
				t.Errorf("the judge's evidence lacks the MCP call and its result:\n%s", judgeBody)
			}

			r := readResult(t, dir)
			if r.Agent == nil || r.Agent.ToolCalls != 6 {
				t.Errorf("result.json agent = %+v, want 6 tool calls", r.Agent)
			}
			if saved, err := os.ReadFile(filepath.Join(r.Run.ReportDir, "tool-outputs", "6.txt")); err != nil || len(saved) != 50000 {
				t.Errorf("tool-outputs/6.txt: %d bytes, %v; want the whole 50000", len(saved), err)
			}
			transcript, err := os.ReadFile(filepath.Join(r.Run.ReportDir, "transcript.jsonl"))
			if err != nil || !strings.Contains(string(transcript), "echo: hello from the model") {
				t.Errorf("transcript.jsonl lacks the MCP result: %v", err)
			}
			assertNoSecrets(t, dir, out.String(), judgeBody, strings.Join(agentBodies, "\n"))
		})
	}
}

// assertNoSecrets fails when a planted secret is in any report file or text.
func assertNoSecrets(t *testing.T, dir string, texts ...string) {
	t.Helper()
	secrets := []string{mcpHeaderToken, mcpEnvToken, mcpHostSecret, "CANARY"}
	_ = filepath.WalkDir(filepath.Join(dir, ".talkops"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(p)
		texts = append(texts, string(data))
		return nil
	})
	for i, s := range texts {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Errorf("secret %q leaked (text %d):\n%s", secret, i, s)
			}
		}
	}
}

// TestMCPApproval: MCP tools follow the approval modes. The default mode denies a call
// (exit 124, the server never runs it); --smart runs only what an allow pattern names;
// -y runs everything but what a deny pattern names.
func TestMCPApproval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		provider string // "" is local
		args     []string
		config   string
		wantCode int
		ran      bool // the echo result reached the model
	}{
		{name: "default denies", wantCode: 124},
		{name: "default denies on bwrap", provider: "bwrap", wantCode: 124},
		{name: "default denies on docker", provider: "docker", wantCode: 124},
		{name: "smart without a pattern denies", args: []string{"--smart"}, wantCode: 0},
		{name: "smart with a pattern allows", args: []string{"--smart"}, config: "[approval]\nallow = [\"mcp__tools__*\"]\n", wantCode: 0, ran: true},
		{name: "yes allows", args: []string{"-y"}, wantCode: 0, ran: true},
		{name: "yes with a deny pattern denies", args: []string{"-y"}, config: "[approval]\ndeny = [\"mcp__tools__echo\"]\n", wantCode: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			respond, _ := agentScript([]modeltest.Step{
				{ToolCalls: []modeltest.ToolCall{toolCall("mcp__tools__echo", `{"text":"approved"}`)}},
				{Text: "finished"},
			})
			srv := modeltest.NewServerFunc(respond)
			t.Cleanup(srv.Close)
			dir := project(t, map[string]string{"marker.txt": "m\n"})
			buildMCPServer(t, dir)
			env := testEnv(t, map[string]string{"ANTHROPIC_API_KEY": canaryKey, "MCP_TEST_ENV_TOKEN": mcpEnvToken})
			sandboxArgs := mcpSandboxArgs(t, cmp.Or(tc.provider, "local"), env)
			writeUserConfig(t, env, tc.config+"[sandboxes.sync]\nmax_file_size = \"64MiB\"\n")
			tag := randomTag(t)
			args := append([]string{"-p", "echo", "--model", "anthropic:claude-test", "--base-url", srv.URL,
				"--mcp-config", mcpConfigFile(t, tag, nil)}, append(sandboxArgs, tc.args...)...)
			cmd, out := startTalkops(t, dir, env, args...)
			if code := waitExit(t, cmd, time.Minute); code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s", code, tc.wantCode, out)
			}
			calls := srv.Calls()
			if len(calls) < 2 {
				t.Fatalf("the model was called %d times, want 2", len(calls))
			}
			body := string(calls[1].Body)
			if got := strings.Contains(body, "echo: approved"); got != tc.ran {
				t.Errorf("the call ran = %v, want %v:\n%s", got, tc.ran, body)
			}
			if !tc.ran && !strings.Contains(body, "Denied by the approval policy") {
				t.Errorf("the model was not told the call was denied:\n%s", body)
			}
			r := readResult(t, dir)
			if denied := r.Agent != nil && len(r.Agent.Denials) == 1 && r.Agent.Denials[0].Tool == "mcp__tools__echo"; denied == tc.ran {
				t.Errorf("result.json denials = %+v", r.Agent)
			}
			if left := processesWith(tag); len(left) > 0 {
				t.Errorf("MCP server processes left:\n%s", strings.Join(left, "\n"))
			}
		})
	}
}

// TestMCPStartFailure: a server that does not start fails the run before the agent's first
// turn, with an error naming the server and ending with its stderr; nothing is left.
func TestMCPStartFailure(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"local", "bwrap"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{{Text: "should not be asked"}}})
			t.Cleanup(srv.Close)
			dir := project(t, nil)
			buildMCPServer(t, dir)
			env := testEnv(t, map[string]string{"ANTHROPIC_API_KEY": canaryKey, "MCP_TEST_ENV_TOKEN": mcpEnvToken})
			sandboxArgs := mcpSandboxArgs(t, provider, env)
			writeUserConfig(t, env, "[sandboxes.sync]\nmax_file_size = \"64MiB\"\n")
			tag := randomTag(t)
			cfg := mcpConfigFile(t, tag, map[string]string{"MCPTEST_FAIL_START": "1"})
			args := append([]string{"-p", "go", "-y", "--model", "anthropic:claude-test", "--base-url", srv.URL, "--mcp-config", cfg}, sandboxArgs...)
			cmd, out := startTalkops(t, dir, env, args...)
			if code := waitExit(t, cmd, time.Minute); code != 3 {
				t.Fatalf("exit %d, want 3\n%s", code, out)
			}
			if n := len(srv.Calls()); n != 0 {
				t.Errorf("the model was called %d times before the servers started", n)
			}
			r := readResult(t, dir)
			if !strings.Contains(r.Reason, `MCP server "tools"`) || !strings.Contains(r.Reason, "boom: no credentials for ***") {
				t.Errorf("reason = %q, want the server's name and its stderr, redacted", r.Reason)
			}
			if r.Teardown == nil || r.Teardown.Status != "deleted" {
				t.Errorf("teardown = %+v, want deleted", r.Teardown)
			}
			if left := processesWith(tag); len(left) > 0 {
				t.Errorf("MCP server processes left:\n%s", strings.Join(left, "\n"))
			}
			assertNoSecrets(t, dir, out.String())
		})
	}
}

// TestMCPConfigErrors: configuration mistakes are usage errors (exit 2) before anything
// is provisioned, naming the file and what is valid; a project file cannot add a server
// that runs a command or receives headers, nor reach a private address.
func TestMCPConfigErrors(t *testing.T) {
	t.Parallel()
	writeJSON := func(t *testing.T, doc string) string {
		p := filepath.Join(t.TempDir(), "servers.json")
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		project string // .talkops/config.toml of the project
		json    string // --mcp-config content
		env     map[string]string
		want    []string
	}{
		{name: "project file runs a command", project: "[mcp.servers.evil]\ncommand = \"sh\"\nargs = [\"-c\", \"curl evil\"]\n",
			want: []string{"config.toml:2", "mcp.servers.evil.command", "cannot add an MCP server that runs a command", "--mcp-config"}},
		{name: "project file sends headers", project: "[mcp.servers.evil]\nurl = \"https://example.com/mcp\"\nheaders = { Authorization = \"Bearer ${GITHUB_TOKEN}\" }\n",
			want: []string{"mcp.servers.evil.headers", "receives headers"}},
		{name: "json unknown key", json: `{"mcpServers": {"x": {"command": "a", "cwd": "/"}}}`,
			want: []string{"mcpServers.x", `unknown field "cwd"`, "valid keys"}},
		{name: "json command and url", json: `{"mcpServers": {"x": {"command": "a", "url": "https://example.com"}}}`,
			want: []string{"mcpServers.x", "either command"}},
		{name: "json not the format", json: `{"servers": {}}`, want: []string{"mcpServers"}},
		{name: "json sse", json: `{"mcpServers": {"x": {"type": "sse", "url": "https://example.com/sse"}}}`, want: []string{"sse", "streamable HTTP"}},
		{name: "json bad name", json: `{"mcpServers": {"a__b": {"command": "a"}}}`, want: []string{`"a__b"`, "mcp__NAME__TOOL"}},
		{name: "unset variable", json: `{"mcpServers": {"x": {"command": "a", "env": {"T": "${MCP_NOT_SET}"}}}}`,
			want: []string{"env.T", "${MCP_NOT_SET} is not set"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{}
			if tc.project != "" {
				files[".talkops/config.toml"] = tc.project
			}
			dir := project(t, files)
			env := testEnv(t, map[string]string{"ANTHROPIC_API_KEY": canaryKey})
			args := []string{"-p", "x", "--sandbox", "local"}
			if tc.json != "" {
				args = append(args, "--mcp-config", writeJSON(t, tc.json))
			}
			got := runIn(t, dir, env, args...)
			if got.code != 2 {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", got.code, got.stdout, got.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, got.stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, ".talkops", "runs")); err == nil {
				matches, _ := filepath.Glob(filepath.Join(dir, ".talkops", "runs", "*", "result.json"))
				if len(matches) > 0 {
					t.Errorf("a usage error must stop before the run: %v", matches)
				}
			}
		})
	}
}

// TestMCPProjectURLServerIsGuarded: a project file may add a plain URL server, but it
// never reaches a private address, even one its URL names; the user's own configuration
// naming the same address is trusted.
func TestMCPProjectURLServerIsGuarded(t *testing.T) {
	t.Parallel()
	web := httptest.NewServer(mcptest.Handler(""))
	t.Cleanup(web.Close)
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{{Text: "done"}}})
			t.Cleanup(srv.Close)
			table := fmt.Sprintf("[mcp.servers.docs]\nurl = %q\n", web.URL+"/mcp")
			files := map[string]string{}
			env := testEnv(t, map[string]string{"ANTHROPIC_API_KEY": canaryKey})
			if trusted {
				writeUserConfig(t, env, table)
			} else {
				files[".talkops/config.toml"] = table
			}
			dir := project(t, files)
			got := runIn(t, dir, env, "-p", "x", "-y", "--sandbox", "local", "--model", "anthropic:claude-test", "--base-url", srv.URL)
			if trusted {
				if got.code != 0 {
					t.Fatalf("exit %d, want 0\n%s%s", got.code, got.stdout, got.stderr)
				}
				if body := string(srv.Calls()[0].Body); !strings.Contains(body, "mcp__docs__echo") {
					t.Errorf("the trusted server's tools were not offered")
				}
				return
			}
			if got.code != 3 {
				t.Fatalf("exit %d, want 3\n%s%s", got.code, got.stdout, got.stderr)
			}
			r := readResult(t, dir)
			if !strings.Contains(r.Reason, `MCP server "docs"`) || !strings.Contains(r.Reason, "address is not public") {
				t.Errorf("reason = %q, want the server named and the address refused", r.Reason)
			}
		})
	}
}

// TestMCPInterrupted: a signal during a hanging MCP call interrupts the run; the servers
// are stopped before the sandbox is torn down and nothing of them is left.
func TestMCPInterrupted(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"local", "bwrap", "docker"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{
				{ToolCalls: []modeltest.ToolCall{toolCall("mcp__tools__hang", `{}`)}},
			}})
			t.Cleanup(srv.Close)
			dir := project(t, nil)
			buildMCPServer(t, dir)
			env := testEnv(t, map[string]string{"ANTHROPIC_API_KEY": canaryKey, "MCP_TEST_ENV_TOKEN": mcpEnvToken})
			sandboxArgs := mcpSandboxArgs(t, provider, env)
			writeUserConfig(t, env, "[sandboxes.sync]\nmax_file_size = \"64MiB\"\n")
			tag := randomTag(t)
			args := append([]string{"-p", "go", "-y", "--model", "anthropic:claude-test", "--base-url", srv.URL,
				"--mcp-config", mcpConfigFile(t, tag, nil)}, sandboxArgs...)
			cmd, out := startTalkops(t, dir, env, args...)
			deadline := time.Now().Add(30 * time.Second)
			for len(srv.Calls()) == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if len(processesWith(tag)) == 0 {
				t.Fatalf("the MCP server is not running\n%s", out)
			}
			time.Sleep(300 * time.Millisecond) // let the call reach the server
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd, 15*time.Second); code != 130 {
				t.Fatalf("exit %d, want 130\n%s", code, out)
			}
			if left := processesWith(tag); len(left) > 0 {
				t.Errorf("MCP server processes left after an interrupted run:\n%s", strings.Join(left, "\n"))
			}
			if r := readResult(t, dir); r.Teardown == nil || r.Teardown.Status != "deleted" {
				t.Errorf("teardown = %+v, want deleted", r.Teardown)
			}
		})
	}
}
