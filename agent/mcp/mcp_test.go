package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talkops/talkops/agent/mcp/mcptest"
	"github.com/talkops/talkops/agent/tools"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
)

// serverBin is the stdio test server, built once for the package's tests.
var serverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcptest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverBin = filepath.Join(dir, "mcpserver")
	out, err := exec.Command("go", "build", "-o", serverBin, "github.com/talkops/talkops/agent/mcp/mcptest/mcpserver").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build the test server: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func localSandbox(t *testing.T) providers.Sandbox {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "marker.txt"), []byte("in-the-sandbox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := local.New(local.Options{}).Create(t.Context(), providers.Spec{RunID: "mcp-test", ProjectDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb
}

func start(t *testing.T, opts Options, servers ...Server) *Set {
	t.Helper()
	set, err := Start(t.Context(), servers, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close(context.Background()) })
	return set
}

func call(t *testing.T, set *Set, name, input string) tools.Result {
	t.Helper()
	for _, tl := range set.Tools() {
		if tl.Def().Name == name {
			res, err := tl.Run(t.Context(), json.RawMessage(input))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return res
		}
	}
	t.Fatalf("no tool %s", name)
	return tools.Result{}
}

func TestStdioServerInTheSandbox(t *testing.T) {
	t.Parallel()
	sb := localSandbox(t)
	set := start(t, Options{Sandbox: sb}, Server{Name: "t", Command: serverBin, Env: map[string]string{"SERVER_TOKEN": "tok"}, Trusted: true})
	var names []string
	for _, tl := range set.Tools() {
		names = append(names, tl.Def().Name)
		if tl.Kind() != tools.External {
			t.Errorf("%s: kind %v, want external", tl.Def().Name, tl.Kind())
		}
	}
	if got := strings.Join(names, " "); got != "mcp__t__big mcp__t__crash mcp__t__echo mcp__t__hang mcp__t__whoami" {
		t.Errorf("tools = %s", got)
	}
	res := call(t, set, "mcp__t__echo", `{"text":"hi"}`)
	if res.IsError || !strings.Contains(res.Output, "echo: hi") || !strings.Contains(res.Output, "marker=in-the-sandbox") ||
		!strings.Contains(res.Output, "cwd="+sb.WorkDir()) || !strings.Contains(res.Output, "server_token=tok") {
		t.Errorf("echo = %+v", res)
	}
	if res.Exec == nil || res.Exec.Command != `mcp__t__echo {"text":"hi"}` || res.Exec.Stdout != res.Output || res.Exec.ExitCode != 0 {
		t.Errorf("evidence record = %+v", res.Exec)
	}
	if res := call(t, set, "mcp__t__echo", `[1]`); !res.IsError || !strings.Contains(res.Output, "JSON object") {
		t.Errorf("bad arguments = %+v", res)
	}
}

func TestCallFailuresNameTheServer(t *testing.T) {
	t.Parallel()
	opts := Options{Sandbox: localSandbox(t), CallTimeout: 500 * time.Millisecond, MaxMessage: 64 << 10}
	// A message over the size cap ends the session (the SDK drops the connection).
	capped := start(t, opts, Server{Name: "capped", Command: serverBin})
	res := call(t, capped, "mcp__capped__big", `{"bytes": 200000}`)
	if !res.IsError || !strings.Contains(res.Output, `MCP server "capped"`) || !strings.Contains(res.Output, "maximum") {
		t.Errorf("a result over the size cap = %+v, want an error naming the server", res)
	}
	set := start(t, opts, Server{Name: "flaky", Command: serverBin, Trusted: true})
	res = call(t, set, "mcp__flaky__hang", `{}`)
	if !res.IsError || !strings.Contains(res.Output, `MCP server "flaky" did not answer hang within 500ms`) || res.Exec.ExitCode != 124 {
		t.Errorf("hang = %+v", res)
	}
	res = call(t, set, "mcp__flaky__crash", `{}`)
	if !res.IsError || !strings.Contains(res.Output, `MCP server "flaky" stopped while running crash`) || !strings.Contains(res.Output, "crashing now") {
		t.Errorf("crash = %+v", res)
	}
	res = call(t, set, "mcp__flaky__echo", `{"text":"x"}`)
	if !res.IsError || !strings.Contains(res.Output, `MCP server "flaky"`) {
		t.Errorf("a call to a dead server = %+v", res)
	}
}

// hidden hides the sandbox's optional abilities, like a provider without streaming exec.
type hidden struct{ providers.Sandbox }

func TestHostServerHasACleanEnvironment(t *testing.T) {
	// Not parallel: it sets a variable in this process's environment.
	t.Setenv("MCP_HOST_SECRET", "must-not-pass")
	var mu sync.Mutex
	var warnings []string
	warn := func(m string) { mu.Lock(); warnings = append(warnings, m); mu.Unlock() }
	for name, srv := range map[string]Server{
		"no streaming": {Name: "fallback", Command: serverBin, Env: map[string]string{"SERVER_TOKEN": "x1"}},
		"host = true":  {Name: "onhost", Command: serverBin, Env: map[string]string{"SERVER_TOKEN": "x2"}, Host: true},
	} {
		t.Run(name, func(t *testing.T) {
			set := start(t, Options{Sandbox: hidden{localSandbox(t)}, Warn: warn}, srv)
			res := call(t, set, ToolName(srv.Name, "echo"), `{"text":"h"}`)
			if !strings.Contains(res.Output, "server_token="+srv.Env["SERVER_TOKEN"]) || !strings.Contains(res.Output, "host_secret=\n") {
				t.Errorf("echo = %q: want the configured env and nothing else of ours", res.Output)
			}
		})
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `MCP server "fallback" runs on the host`) {
		t.Errorf("warnings = %q, want one about the fallback", warnings)
	}
}

func TestStartFailureNamesTheServer(t *testing.T) {
	t.Parallel()
	sb := localSandbox(t)
	_, err := Start(t.Context(), []Server{
		{Name: "good", Command: serverBin},
		{Name: "bad", Command: serverBin, Env: map[string]string{"MCPTEST_FAIL_START": "1", "SERVER_TOKEN": "abc"}, Source: "servers.json: mcpServers.bad"},
	}, Options{Sandbox: sb})
	if err == nil || !strings.Contains(err.Error(), `MCP server "bad" (servers.json: mcpServers.bad, on the sandbox) did not start`) ||
		!strings.Contains(err.Error(), "boom: no credentials for abc") {
		t.Fatalf("err = %v", err)
	}
	_, err = Start(t.Context(), []Server{{Name: "missing", Command: "./no-such-server"}}, Options{Sandbox: sb})
	if err == nil || !strings.Contains(err.Error(), `MCP server "missing" (on the sandbox) did not start`) ||
		!strings.Contains(err.Error(), "exited with code 127 (./no-such-server: command not found)") {
		t.Fatalf("err = %v", err)
	}
}

func TestHTTPServer(t *testing.T) {
	t.Parallel()
	web := httptest.NewServer(mcptest.Handler("Bearer s3cret"))
	t.Cleanup(web.Close)
	srv := Server{Name: "web", URL: web.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}, Trusted: true}
	set := start(t, Options{Sandbox: localSandbox(t)}, srv)
	if res := call(t, set, "mcp__web__whoami", `{}`); res.Output != "authorization=Bearer s3cret" {
		t.Errorf("whoami = %+v", res)
	}
	// The same URL from an untrusted file is refused at connect time; so is a trusted
	// URL whose host is a name that resolves to loopback, which it did not name literally.
	for _, s := range []Server{
		{Name: "web", URL: srv.URL},
		{Name: "web", URL: strings.Replace(srv.URL, "127.0.0.1", "localtest.invalid", 1), Trusted: true},
	} {
		_, err := Start(t.Context(), []Server{s}, Options{Sandbox: localSandbox(t), StartTimeout: 10 * time.Second})
		if err == nil || !strings.Contains(err.Error(), `MCP server "web"`) {
			t.Errorf("%s (trusted %v): err = %v, want a refusal naming the server", s.URL, s.Trusted, err)
		}
	}
	_, err := Start(t.Context(), []Server{{Name: "web", URL: srv.URL}}, Options{Sandbox: localSandbox(t)})
	if err == nil || !strings.Contains(err.Error(), "address is not public") {
		t.Errorf("err = %v, want the private-address refusal", err)
	}
}

// TestCloseLeavesNothing is not parallel: it finds the servers by their binary's path, which
// the package's other tests run too.
func TestCloseLeavesNothing(t *testing.T) {
	sb := localSandbox(t)
	set, err := Start(t.Context(), []Server{{Name: "a", Command: serverBin}, {Name: "b", Command: serverBin, Host: true}}, Options{Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, s := range set.servers {
		if s.done == nil {
			t.Fatal("a stdio server without a process")
		}
	}
	out, _ := exec.Command("pgrep", "-f", serverBin).Output()
	for _, f := range strings.Fields(string(out)) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p)
	}
	if len(pids) < 2 {
		t.Fatalf("want two server processes, pgrep found %v", pids)
	}
	set.Close(t.Context())
	set.Close(t.Context()) // idempotent
	for _, p := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err == nil {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
			if !strings.Contains(string(stat), ") Z ") {
				t.Errorf("server process %d still runs after Close", p)
			}
		}
	}
}
