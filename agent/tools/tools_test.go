package tools_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/agent/tools"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/result"
)

// flavour is a sandbox userland the file tools must work with.
type flavour struct {
	name  string
	setup func(t *testing.T) (path, shell string) // "" = the host's
}

var flavours = []flavour{
	{name: "host", setup: func(t *testing.T) (string, string) { return "", "" }},
	{name: "busybox", setup: busybox},
}

// busybox builds a PATH holding only busybox applets, so the scripts are checked against
// the minimal userland of Alpine-style images.
func busybox(t *testing.T) (string, string) {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("busybox is not installed; .ci/run installs busybox-static")
		}
		t.Skip("busybox not installed (apt-get install busybox-static)")
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Skipf("busybox --list: %v", err)
	}
	dir := t.TempDir()
	for _, applet := range strings.Fields(string(out)) {
		if err := os.Symlink(bb, filepath.Join(dir, applet)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(dir, "sh")
}

type fixture struct {
	env *tools.Env
	dir string // the working directory on the host
	sb  providers.Sandbox
}

func newFixture(t *testing.T, f flavour) *fixture {
	t.Helper()
	pathEnv, shell := f.setup(t)
	dir := t.TempDir()
	getenv := os.Getenv
	if pathEnv != "" {
		getenv = func(k string) string {
			if k == "PATH" {
				return pathEnv
			}
			return os.Getenv(k)
		}
	}
	p := local.New(local.Options{Getenv: getenv})
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "tools-test", ProjectDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.WithoutCancel(t.Context())) })
	return &fixture{env: &tools.Env{Sandbox: sb, Shell: shell}, dir: dir, sb: sb}
}

func (fx *fixture) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(fx.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (fx *fixture) tool(t *testing.T, name string) tools.Tool {
	t.Helper()
	for _, tl := range tools.All(fx.env) {
		if tl.Def().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

func (fx *fixture) run(t *testing.T, name string, input any) tools.Result {
	t.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	res, err := fx.tool(t, name).Run(t.Context(), raw)
	if err != nil {
		t.Fatalf("%s(%s): infrastructure error %v", name, raw, err)
	}
	return res
}

type call struct {
	name      string
	tool      string
	input     map[string]any
	wantErr   bool
	contains  []string
	excludes  []string
	afterFile map[string]string // host files (relative) and their wanted content; "" = must not exist
}

func runCalls(t *testing.T, fx *fixture, calls []call) {
	t.Helper()
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			res := fx.run(t, c.tool, c.input)
			if res.IsError != c.wantErr {
				t.Errorf("%s(%v).IsError = %v, want %v; output:\n%s", c.tool, c.input, res.IsError, c.wantErr, res.Output)
			}
			for _, s := range c.contains {
				if !strings.Contains(res.Output, s) {
					t.Errorf("%s(%v) output lacks %q:\n%s", c.tool, c.input, s, res.Output)
				}
			}
			for _, s := range c.excludes {
				if strings.Contains(res.Output, s) {
					t.Errorf("%s(%v) output contains %q:\n%s", c.tool, c.input, s, res.Output)
				}
			}
			for rel, want := range c.afterFile {
				got, err := os.ReadFile(filepath.Join(fx.dir, rel))
				if want == "" {
					if err == nil {
						t.Errorf("%s exists after %s, want it absent", rel, c.tool)
					}
					continue
				}
				if err != nil {
					t.Errorf("read %s: %v", rel, err)
				} else if string(got) != want {
					t.Errorf("%s = %q, want %q", rel, got, want)
				}
			}
		})
	}
}

func TestFileTools(t *testing.T) {
	t.Parallel()
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, f)
			var long strings.Builder
			for i := 1; i <= 1200; i++ {
				long.WriteString("line ")
				long.WriteString(strings.Repeat("x", i%7))
				long.WriteString("\n")
			}
			fx.write(t, "long.txt", long.String())
			fx.write(t, "main.tf", "resource \"aws_security_group\" \"ssh\" {\n  cidr = \"0.0.0.0/0\"\n}\n")
			fx.write(t, "modules/net/vpc.tf", "cidr = \"10.0.0.0/16\"\n")
			fx.write(t, "modules/net/README.md", "Network module\n")
			fx.write(t, ".hidden", "secret-ish\n")
			fx.write(t, ".git/config", "[core]\n  cidr = 0.0.0.0/0\n")
			fx.write(t, "noeol.txt", "no newline")
			fx.write(t, "wide.txt", strings.Repeat("w", 3000)+"\n")
			fx.write(t, "dup.txt", "a = 1\nb = 2\na = 1\n")
			fx.write(t, "ws.txt", "func main() {\n\tfmt.Println(\"hi\")\n}\n")
			fx.write(t, "blob.bin", "\x7fELF\x00\x00\x01\x02")
			fx.write(t, "empty.txt", "")
			fx.write(t, "run.sh", "#!/bin/sh\necho old\n")
			if err := os.Chmod(filepath.Join(fx.dir, "run.sh"), 0o755); err != nil {
				t.Fatal(err)
			}
			outside := t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "passwd"), []byte("root:x:0:0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for link, target := range map[string]string{
				"rootlink":      "/",
				"outlink":       outside,
				"passwd-link":   filepath.Join(outside, "passwd"),
				"inner-link.tf": "main.tf",
			} {
				if err := os.Symlink(target, filepath.Join(fx.dir, link)); err != nil {
					t.Fatal(err)
				}
			}

			runCalls(t, fx, []call{
				// read_file
				{name: "read window", tool: "read_file", input: map[string]any{"path": "long.txt", "offset": 10, "limit": 3},
					contains: []string{"    10\tline xxx\n", "    12\tline xxxxx\n", "[lines 10-12 of 1200; call read_file with offset=13 to continue]"},
					excludes: []string{"    13\t"}},
				{name: "read default limit", tool: "read_file", input: map[string]any{"path": "long.txt"},
					contains: []string{"     1\tline x\n", "   500\t", "offset=501"}},
				{name: "read absolute inside", tool: "read_file", input: map[string]any{"path": filepath.Join(fx.dir, "noeol.txt")},
					contains: []string{"     1\tno newline\n"}, excludes: []string{"offset="}},
				{name: "read through inner symlink", tool: "read_file", input: map[string]any{"path": "inner-link.tf"}, contains: []string{"0.0.0.0/0"}},
				{name: "read long line cut", tool: "read_file", input: map[string]any{"path": "wide.txt"}, contains: []string{"[line cut, 3000 characters]"}},
				{name: "read empty", tool: "read_file", input: map[string]any{"path": "empty.txt"}, contains: []string{"empty.txt is empty"}},
				{name: "read past end", tool: "read_file", input: map[string]any{"path": "noeol.txt", "offset": 5}, wantErr: true, contains: []string{"offset 5 is past the end"}},
				{name: "read missing", tool: "read_file", input: map[string]any{"path": "nope.txt"}, wantErr: true, contains: []string{"nope.txt does not exist"}},
				{name: "read directory", tool: "read_file", input: map[string]any{"path": "modules"}, wantErr: true, contains: []string{"is a directory"}},
				{name: "read binary", tool: "read_file", input: map[string]any{"path": "blob.bin"}, wantErr: true, contains: []string{"binary file"}},
				{name: "read dotdot escape", tool: "read_file", input: map[string]any{"path": "../etc/passwd"}, wantErr: true, contains: []string{"outside the working directory"}},
				{name: "read absolute outside", tool: "read_file", input: map[string]any{"path": "/etc/passwd"}, wantErr: true, contains: []string{"outside the working directory"}},
				{name: "read via symlink to root", tool: "read_file", input: map[string]any{"path": "rootlink/etc/passwd"}, wantErr: true, contains: []string{"outside the working directory"}, excludes: []string{"root:x"}},
				{name: "read symlinked file outside", tool: "read_file", input: map[string]any{"path": "passwd-link"}, wantErr: true, contains: []string{"outside the working directory"}, excludes: []string{"root:x"}},
				{name: "read negative offset", tool: "read_file", input: map[string]any{"path": "long.txt", "offset": -1}, wantErr: true},

				// write_file
				{name: "write nested new", tool: "write_file", input: map[string]any{"path": "out/deep/new.txt", "content": "$(touch pwned) `id` \"q\" 'q'\nno eol"},
					contains: []string{"Created out/deep/new.txt"}, afterFile: map[string]string{"out/deep/new.txt": "$(touch pwned) `id` \"q\" 'q'\nno eol", "pwned": ""}},
				{name: "write odd name", tool: "write_file", input: map[string]any{"path": "a b'c\";$x.txt", "content": "ok\n"},
					afterFile: map[string]string{"a b'c\";$x.txt": "ok\n"}},
				{name: "write overwrite", tool: "write_file", input: map[string]any{"path": "noeol.txt", "content": "replaced\n"},
					contains: []string{"Overwrote noeol.txt"}, afterFile: map[string]string{"noeol.txt": "replaced\n"}},
				{name: "write empty content", tool: "write_file", input: map[string]any{"path": "blank.txt", "content": ""}, afterFile: map[string]string{}},
				{name: "write missing content", tool: "write_file", input: map[string]any{"path": "x.txt"}, wantErr: true, contains: []string{"content is required"}},
				{name: "write dotdot escape", tool: "write_file", input: map[string]any{"path": "../escape.txt", "content": "x"}, wantErr: true, contains: []string{"outside"}},
				{name: "write through symlinked dir", tool: "write_file", input: map[string]any{"path": "outlink/new.txt", "content": "x"}, wantErr: true, contains: []string{"outside the working directory"}},
				{name: "write new dir under symlinked dir", tool: "write_file", input: map[string]any{"path": "outlink/sub/new.txt", "content": "x"}, wantErr: true, contains: []string{"outside the working directory"}},
				{name: "write over symlink to outside", tool: "write_file", input: map[string]any{"path": "passwd-link", "content": "pwned"}, wantErr: true, contains: []string{"outside"}},
				{name: "write onto directory", tool: "write_file", input: map[string]any{"path": "modules", "content": "x"}, wantErr: true, contains: []string{"is a directory"}},

				// edit_file
				{name: "edit unique", tool: "edit_file", input: map[string]any{"path": "main.tf", "old_string": "\"0.0.0.0/0\"", "new_string": "\"10.0.0.0/8\""},
					contains:  []string{"Edited main.tf: replaced 1 occurrence(s).", "     2\t  cidr = \"10.0.0.0/8\""},
					afterFile: map[string]string{"main.tf": "resource \"aws_security_group\" \"ssh\" {\n  cidr = \"10.0.0.0/8\"\n}\n"}},
				{name: "edit ambiguous", tool: "edit_file", input: map[string]any{"path": "dup.txt", "old_string": "a = 1", "new_string": "a = 9"},
					wantErr: true, contains: []string{"occurs 2 times", "lines 1, 3", "replace_all"}, afterFile: map[string]string{"dup.txt": "a = 1\nb = 2\na = 1\n"}},
				{name: "edit replace all", tool: "edit_file", input: map[string]any{"path": "dup.txt", "old_string": "a = 1", "new_string": "a = 9", "replace_all": true},
					contains: []string{"replaced 2 occurrence(s)"}, afterFile: map[string]string{"dup.txt": "a = 9\nb = 2\na = 9\n"}},
				{name: "edit not found", tool: "edit_file", input: map[string]any{"path": "dup.txt", "old_string": "zzz", "new_string": "y"},
					wantErr: true, contains: []string{"old_string was not found in dup.txt (3 lines)"}},
				{name: "edit whitespace hint", tool: "edit_file", input: map[string]any{"path": "ws.txt", "old_string": "    fmt.Println(\"hi\")", "new_string": "x"},
					wantErr: true, contains: []string{"different whitespace", "line 2"}},
				{name: "edit line number hint", tool: "edit_file", input: map[string]any{"path": "ws.txt", "old_string": "     2\t\tfmt.Println(\"hi\")", "new_string": "x"},
					wantErr: true, contains: []string{"line-number prefixes"}},
				{name: "edit missing file", tool: "edit_file", input: map[string]any{"path": "ghost.txt", "old_string": "a", "new_string": "b"},
					wantErr: true, contains: []string{"use write_file"}},
				{name: "edit identical", tool: "edit_file", input: map[string]any{"path": "dup.txt", "old_string": "b = 2", "new_string": "b = 2"}, wantErr: true, contains: []string{"identical"}},
				{name: "edit empty old", tool: "edit_file", input: map[string]any{"path": "dup.txt", "old_string": "", "new_string": "b"}, wantErr: true, contains: []string{"write_file"}},
				{name: "edit keeps mode", tool: "edit_file", input: map[string]any{"path": "run.sh", "old_string": "old", "new_string": "new"},
					afterFile: map[string]string{"run.sh": "#!/bin/sh\necho new\n"}},
				{name: "edit outside via symlink", tool: "edit_file", input: map[string]any{"path": "outlink/passwd", "old_string": "root", "new_string": "pwned"},
					wantErr: true, contains: []string{"outside"}},

				// ls
				{name: "ls root", tool: "ls", input: map[string]any{}, contains: []string{"main.tf\n", "modules/\n", ".hidden\n", ".git/\n", "rootlink@\n", "inner-link.tf@\n"}},
				{name: "ls sub", tool: "ls", input: map[string]any{"path": "modules/net"}, contains: []string{"README.md\n", "vpc.tf\n"}, excludes: []string{"main.tf"}},
				{name: "ls file", tool: "ls", input: map[string]any{"path": "main.tf"}, wantErr: true, contains: []string{"not a directory"}},
				{name: "ls outside", tool: "ls", input: map[string]any{"path": "rootlink"}, wantErr: true, contains: []string{"outside"}},

				// glob
				{name: "glob recursive", tool: "glob", input: map[string]any{"pattern": "**/*.tf"}, contains: []string{"main.tf\n", "modules/net/vpc.tf\n", "inner-link.tf\n"}},
				{name: "glob top level", tool: "glob", input: map[string]any{"pattern": "*.md"}, contains: []string{"No files match", "**/*.md"}},
				{name: "glob under path", tool: "glob", input: map[string]any{"pattern": "*.{md,tf}", "path": "modules/net"}, contains: []string{"modules/net/README.md\n", "modules/net/vpc.tf\n"}},
				{name: "glob skips .git", tool: "glob", input: map[string]any{"pattern": "**/config"}, excludes: []string{".git/config"}},
				{name: "glob malformed", tool: "glob", input: map[string]any{"pattern": "[a"}, wantErr: true, contains: []string{"malformed"}},
				{name: "glob outside", tool: "glob", input: map[string]any{"pattern": "*", "path": "/etc"}, wantErr: true},

				// grep
				{name: "grep regex", tool: "grep", input: map[string]any{"pattern": `cidr = "[0-9.]+/(0|16)"`}, contains: []string{"modules/net/vpc.tf:1:cidr = \"10.0.0.0/16\""}, excludes: []string{".git/config"}},
				{name: "grep include", tool: "grep", input: map[string]any{"pattern": "Network", "include": "*.md"}, contains: []string{"modules/net/README.md:1:Network module"}},
				{name: "grep fixed string", tool: "grep", input: map[string]any{"pattern": "a = 1.*", "fixed_string": true}, contains: []string{"No matches"}},
				{name: "grep ignore case", tool: "grep", input: map[string]any{"pattern": "network MODULE", "ignore_case": true}, contains: []string{"README.md:1:"}},
				{name: "grep files only", tool: "grep", input: map[string]any{"pattern": "cidr", "files_only": true}, contains: []string{"modules/net/vpc.tf\n"}, excludes: []string{":1:"}},
				{name: "grep single file", tool: "grep", input: map[string]any{"pattern": "b", "path": "dup.txt"}, contains: []string{"dup.txt:2:b = 2"}},
				{name: "grep dash pattern", tool: "grep", input: map[string]any{"pattern": "-rf", "fixed_string": true}, contains: []string{"No matches"}},
				{name: "grep bad regex", tool: "grep", input: map[string]any{"pattern": "a("}, wantErr: true, contains: []string{"grep failed"}},
				{name: "grep outside", tool: "grep", input: map[string]any{"pattern": "root", "path": "outlink"}, wantErr: true, contains: []string{"outside"}},
			})

			info, err := os.Stat(filepath.Join(fx.dir, "run.sh"))
			if err != nil || info.Mode().Perm() != 0o755 {
				t.Errorf("run.sh mode after edit = %v (%v), want 0755", info.Mode().Perm(), err)
			}
			if data, _ := os.ReadFile(filepath.Join(outside, "passwd")); string(data) != "root:x:0:0\n" {
				t.Errorf("file outside the working directory changed: %q", data)
			}
			if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
				t.Errorf("write_file created a file outside the working directory")
			}
		})
	}
}

func TestExecute(t *testing.T) {
	t.Parallel()
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, f)
			fx.env.ToolTimeout = 5 * time.Second
			var beats atomic.Int64
			fx.env.Progress = func() { beats.Add(1) }

			res := fx.run(t, "execute", map[string]any{"command": "echo out; echo err >&2; echo \"pager=$PAGER\"; exit 3"})
			for _, s := range []string{"out\n", "pager=cat\n", "[stderr]\nerr\n", "[exit code 3]"} {
				if !strings.Contains(res.Output, s) {
					t.Errorf("output lacks %q:\n%s", s, res.Output)
				}
			}
			if res.Exec == nil || res.Exec.ExitCode != 3 || res.Exec.Stdout != "out\npager=cat\n" || res.Exec.Stderr != "err\n" {
				t.Errorf("Exec record = %+v", res.Exec)
			}
			if beats.Load() == 0 {
				t.Errorf("no progress reported while the command printed")
			}

			res = fx.run(t, "execute", map[string]any{"command": "cat; echo done", "timeout_seconds": 5})
			if !strings.Contains(res.Output, "done") {
				t.Errorf("stdin is not empty (cat waited?):\n%s", res.Output)
			}

			start := time.Now()
			res = fx.run(t, "execute", map[string]any{"command": "sleep 30", "timeout_seconds": 1})
			if !res.Exec.TimedOut || !strings.Contains(res.Output, "timed out after 1s") {
				t.Errorf("timeout not reported: %+v\n%s", res.Exec, res.Output)
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("timed-out command took %v", d)
			}
		})
	}
}

func TestExecuteTimeoutCapped(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, flavours[0])
	fx.env.ToolTimeout = time.Second
	start := time.Now()
	res := fx.run(t, "execute", map[string]any{"command": "sleep 30", "timeout_seconds": 600})
	if !res.Exec.TimedOut {
		t.Errorf("not timed out: %+v", res.Exec)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a 600 s request was not capped by ToolTimeout=1s (took %v)", d)
	}
	if !strings.HasSuffix(res.Exec.Argv[0], "bash") {
		t.Errorf("shell = %q, want bash (the host has it)", res.Exec.Argv[0])
	}
}

func TestExecuteInfraError(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, flavours[0])
	fx.sb.Close(t.Context())
	_, err := fx.tool(t, "execute").Run(t.Context(), json.RawMessage(`{"command":"true"}`))
	if !errors.Is(err, tools.ErrInfra) || !errors.Is(err, providers.ErrClosed) {
		t.Errorf("err = %v, want ErrInfra wrapping ErrClosed", err)
	}
	_, err = fx.tool(t, "read_file").Run(t.Context(), json.RawMessage(`{"path":"x"}`))
	if !errors.Is(err, providers.ErrClosed) {
		t.Errorf("read_file err = %v, want ErrClosed", err)
	}
}

func TestMalformedInput(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, flavours[0])
	for _, tl := range tools.All(fx.env) {
		for _, in := range []string{`"just a string"`, `[1,2]`, `{"path": 3}`, `{"bogus_field": 1}`, `not json`} {
			res, err := tl.Run(t.Context(), json.RawMessage(in))
			if err != nil {
				t.Errorf("%s(%s): err = %v, want a tool error", tl.Def().Name, in, err)
			}
			if !res.IsError || !strings.HasPrefix(res.Output, "Error: ") {
				t.Errorf("%s(%s) = %+v, want IsError with a message", tl.Def().Name, in, res)
			}
		}
	}
}

func TestDefinitions(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, flavours[0])
	seen := map[string]bool{}
	var names []string
	for _, tl := range tools.All(fx.env) {
		d := tl.Def()
		names = append(names, d.Name)
		if seen[d.Name] || d.Description == "" {
			t.Errorf("tool %q: duplicate or undocumented", d.Name)
		}
		seen[d.Name] = true
		var s struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		if err := json.Unmarshal(d.Schema, &s); err != nil || s.Type != "object" || len(s.Properties) == 0 {
			t.Errorf("tool %q schema %s: %v", d.Name, d.Schema, err)
		}
		for _, r := range s.Required {
			if _, ok := s.Properties[r]; !ok {
				t.Errorf("tool %q requires undeclared %q", d.Name, r)
			}
		}
	}
	want := []string{"execute", "read_file", "write_file", "edit_file", "ls", "glob", "grep", "web_fetch", "report_finding"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

func TestWebFetch(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<html><head><style>body{}</style><script>alert(1)</script></head><body><h1>Title &amp; more</h1><p>First<br>second</p><ul><li>one</li><li>two</li></ul></body></html>`))
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "gone", http.StatusNotFound) })
	mux.HandleFunc("/img", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte{0x89, 'P', 'N', 'G', 0})
	})
	mux.HandleFunc("/to-file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	fx := newFixture(t, flavours[0])
	// The default client refuses loopback: this server is only reachable with a
	// permissive client, which the tests below use.
	res := fx.run(t, "web_fetch", map[string]any{"url": srv.URL + "/json"})
	if !res.IsError || !strings.Contains(res.Output, "refused") || !strings.Contains(res.Output, "not public") {
		t.Errorf("default client fetched a loopback URL: %+v", res)
	}

	fx.env.HTTPClient = &http.Client{}
	cases := []struct {
		url      string
		wantErr  bool
		contains []string
		excludes []string
	}{
		{url: srv.URL + "/page", contains: []string{"Status: 200 OK", "Title & more", "First\nsecond", "- one\n- two"}, excludes: []string{"alert", "body{}", "<h1>"}},
		{url: srv.URL + "/json", contains: []string{`{"ok":true}`}},
		{url: srv.URL + "/missing", wantErr: true, contains: []string{"404"}},
		{url: srv.URL + "/img", contains: []string{"bytes of image/png content not shown"}},
		{url: srv.URL + "/to-file", wantErr: true, contains: []string{"only http and https"}},
		{url: srv.URL + "/loop", wantErr: true, contains: []string{"redirects"}},
		{url: "file:///etc/passwd", wantErr: true, contains: []string{"http:// or https://"}},
		{url: "http://user:pw@example.com/", wantErr: true, contains: []string{"credentials"}},
	}
	for _, tc := range cases {
		res := fx.run(t, "web_fetch", map[string]any{"url": tc.url})
		if res.IsError != tc.wantErr {
			t.Errorf("web_fetch(%s).IsError = %v, want %v:\n%s", tc.url, res.IsError, tc.wantErr, res.Output)
		}
		for _, s := range tc.contains {
			if !strings.Contains(res.Output, s) {
				t.Errorf("web_fetch(%s) lacks %q:\n%s", tc.url, s, res.Output)
			}
		}
		for _, s := range tc.excludes {
			if strings.Contains(res.Output, s) {
				t.Errorf("web_fetch(%s) contains %q:\n%s", tc.url, s, res.Output)
			}
		}
	}
}

func TestReportFinding(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, flavours[0])
	res := fx.run(t, "report_finding", map[string]any{
		"path": "./infra/main.tf", "start_line": 12, "end_line": 14, "severity": "Error",
		"title": "SSH open to the world", "message": "Port 22 allows 0.0.0.0/0.", "rule": "open-ssh-ingress",
	})
	if res.IsError || res.Finding == nil {
		t.Fatalf("report_finding failed: %+v", res)
	}
	sum := sha256.Sum256([]byte("open-ssh-ingress\x00infra/main.tf\x00SSH open to the world\x00Port 22 allows 0.0.0.0/0.\x00"))
	want := result.Finding{
		Path: "infra/main.tf", StartLine: 12, EndLine: 14, Severity: "error", Rule: "open-ssh-ingress",
		Title: "SSH open to the world", Message: "Port 22 allows 0.0.0.0/0.", Source: "agent", Fingerprint: hex.EncodeToString(sum[:]),
	}
	if diff := cmp.Diff(want, *res.Finding); diff != "" {
		t.Errorf("finding (-want +got):\n%s", diff)
	}
	moved := fx.run(t, "report_finding", map[string]any{
		"path": filepath.Join(fx.dir, "infra/main.tf"), "start_line": 40, "severity": "error",
		"title": "SSH open to the world", "message": "Port 22 allows 0.0.0.0/0.", "rule": "open-ssh-ingress",
	})
	if moved.Finding == nil || moved.Finding.Fingerprint != want.Fingerprint {
		t.Errorf("fingerprint changed with the line or an absolute path: %+v", moved.Finding)
	}
	for _, bad := range []map[string]any{
		{"severity": "critical", "title": "t", "message": "m"},
		{"severity": "error", "title": "t"},
		{"severity": "error", "title": "t", "message": "m", "path": "../x.tf"},
		{"severity": "error", "title": "t", "message": "m", "path": "a.tf", "start_line": 5, "end_line": 2},
		{"severity": "error", "title": "t", "message": "m", "start_line": 5},
	} {
		if res := fx.run(t, "report_finding", bad); !res.IsError || res.Finding != nil {
			t.Errorf("report_finding(%v) = %+v, want an error", bad, res)
		}
	}
}

// TestGrepLeavesOutWithheldFiles: with Env.Withheld set, a directory search drops the
// lines and names of the files it names, on GNU and busybox grep alike.
func TestGrepLeavesOutWithheldFiles(t *testing.T) {
	t.Parallel()
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, f)
			fx.env.Withheld = func(p string) bool { return path.Base(p) == ".env" }
			fx.write(t, ".env", "KEY=withheld-canary\n")
			fx.write(t, "sub/.env", "KEY=nested-canary\n")
			fx.write(t, "main.tf", "KEY = var.key\n")
			fx.write(t, "a:2:b.txt", "KEY in a file named like a match\n")
			runCalls(t, fx, []call{
				{name: "lines", tool: "grep", input: map[string]any{"pattern": "KEY"},
					contains: []string{"main.tf:1:KEY", "a:2:b.txt:1:KEY"}, excludes: []string{"canary"}},
				{name: "names", tool: "grep", input: map[string]any{"pattern": "KEY", "files_only": true},
					contains: []string{"main.tf\n"}, excludes: []string{".env"}},
				{name: "only withheld", tool: "grep", input: map[string]any{"pattern": "canary"},
					contains: []string{"No matches"}, excludes: []string{"canary\n"}},
			})
		})
	}
}

// TestEnvHome: Home is the HOME execute's commands see, from ExecEnv when it sets one,
// else asked of the sandbox; a HOME that is not an absolute path is unknown.
func TestEnvHome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, hostHome string
		execEnv        map[string]string
		want           string
	}{
		{"the sandbox's", "/var/lib/ci", nil, "/var/lib/ci"},
		{"ExecEnv's first", "/var/lib/ci", map[string]string{"HOME": "/home/agent"}, "/home/agent"},
		{"relative is unknown", "relative/home", nil, ""},
		{"unset is unknown", "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			getenv := func(k string) string {
				if k == "HOME" {
					return tc.hostHome
				}
				return os.Getenv(k)
			}
			sb, err := local.New(local.Options{Getenv: getenv}).Create(t.Context(), providers.Spec{RunID: "tools-home", ProjectDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sb.Close(context.WithoutCancel(t.Context())) })
			env := &tools.Env{Sandbox: sb, ExecEnv: tc.execEnv}
			got, err := env.Home(t.Context())
			if err != nil || got != tc.want {
				t.Errorf("Home() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
