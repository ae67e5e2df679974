package rubric

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
)

const sarifOneResult = `{"version":"2.1.0","runs":[{"tool":{"driver":{"name":"t"}},"results":[
 {"ruleId":"R1","level":"error","message":{"text":"bad thing"},
  "locations":[{"physicalLocation":{"artifactLocation":{"uri":"/workspace/a.tf"},"region":{"startLine":3}}}]}]}]}`

// summary is the part of a check item the table below compares.
type summary struct {
	ID, Reason string
	Status     result.ItemStatus
	ExitCode   *int
	TimedOut   bool
	Findings   int
	Score      *float64
}

func summarize(items []result.Item) []summary {
	var out []summary
	for _, it := range items {
		s := summary{ID: it.ID, Status: it.Status, Reason: it.Reason, Findings: len(it.Findings), Score: it.Score}
		if it.Check != nil {
			s.ExitCode, s.TimedOut = it.Check.ExitCode, it.Check.TimedOut
		}
		out = append(out, s)
	}
	return out
}

func TestRunChecks(t *testing.T) {
	t.Parallel()
	one, zero := 1.0, 0.0
	code := func(c int) *int { return &c }
	tests := []struct {
		name  string
		check string            // a [[check]] body without id
		files map[string][]byte // in the sandbox before the check
		write map[string][]byte // written by the check's command
		res   providers.ExecResult
		err   error
		want  summary
	}{
		{name: "exit as expected", check: `run = ["true"]`, res: providers.ExecResult{ExitCode: 0},
			want: summary{Status: result.StatusPass, ExitCode: code(0), Score: &one}},
		{name: "unexpected exit", check: `run = ["tofu", "validate"]`, res: providers.ExecResult{ExitCode: 1},
			want: summary{Status: result.StatusFail, Reason: "exit code 1, expected 0", ExitCode: code(1), Score: &zero}},
		{name: "expected non-zero exit", check: "run = \"exit 2\"\nexpect_exit = 2", res: providers.ExecResult{ExitCode: 2},
			want: summary{Status: result.StatusPass, ExitCode: code(2), Score: &one}},
		{name: "zero exit when 2 expected", check: "run = \"true\"\nexpect_exit = 2", res: providers.ExecResult{ExitCode: 0},
			want: summary{Status: result.StatusFail, Reason: "exit code 0, expected 2", ExitCode: code(0), Score: &zero}},
		{name: "timeout is a failure", check: "run = \"sleep 600\"\ntimeout = \"2s\"", res: providers.ExecResult{ExitCode: 124, TimedOut: true},
			want: summary{Status: result.StatusFail, Reason: "timed out after 2s", ExitCode: code(124), TimedOut: true, Score: &zero}},
		{name: "could not run", check: `run = ["tofu", "validate"]`, err: errors.New("docker exec: container gone"),
			want: summary{Status: result.StatusError, Reason: "could not run: docker exec: container gone"}},
		{name: "parsed stdout", check: "run = [\"lint\"]\nparse = \"sarif\"", res: providers.ExecResult{Stdout: []byte(sarifOneResult)},
			want: summary{Status: result.StatusPass, ExitCode: code(0), Findings: 1, Score: &one}},
		{name: "failing check keeps its findings", check: "run = [\"lint\"]\nparse = \"sarif\"", res: providers.ExecResult{ExitCode: 1, Stdout: []byte(sarifOneResult)},
			want: summary{Status: result.StatusFail, Reason: "exit code 1, expected 0", ExitCode: code(1), Findings: 1, Score: &zero}},
		{name: "unparsable output of a passing check is an error", check: "run = [\"lint\"]\nparse = \"sarif\"", res: providers.ExecResult{Stdout: []byte("no such command: lint")},
			want: summary{Status: result.StatusError, Reason: "parse sarif output: line 1, column 2: invalid character 'o' in literal null (expecting 'u')", ExitCode: code(0)}},
		{name: "unparsable output of a failing check is noted", check: "run = [\"lint\"]\nparse = \"sarif\"", res: providers.ExecResult{ExitCode: 3},
			want: summary{Status: result.StatusFail, Reason: "exit code 3, expected 0; parse sarif output: the output is empty", ExitCode: code(3), Score: &zero}},
		{name: "command not found is an error", check: `run = ["golangci-lint", "run"]`, res: providers.ExecResult{ExitCode: 127},
			want: summary{Status: result.StatusError, Reason: "exit code 127: the command was not found or is not executable, so the check could not run", ExitCode: code(127)}},
		{name: "command not executable is an error", check: `run = ["./lint.sh"]`, res: providers.ExecResult{ExitCode: 126},
			want: summary{Status: result.StatusError, Reason: "exit code 126: the command was not found or is not executable, so the check could not run", ExitCode: code(126)}},
		{name: "127 expected", check: "run = [\"nope\"]\nexpect_exit = 127", res: providers.ExecResult{ExitCode: 127},
			want: summary{Status: result.StatusPass, ExitCode: code(127), Score: &one}},
		{name: "parse_file", check: "run = [\"lint\"]\nparse = \"sarif\"\nparse_file = \"reports/lint.sarif\"",
			write: map[string][]byte{"reports/lint.sarif": []byte(sarifOneResult)}, res: providers.ExecResult{Stdout: []byte("not json")},
			want: summary{Status: result.StatusPass, ExitCode: code(0), Findings: 1, Score: &one}},
		{name: "missing parse_file", check: "run = [\"lint\"]\nparse = \"sarif\"\nparse_file = \"reports/lint.sarif\"",
			want: summary{Status: result.StatusError, Reason: "read parse_file reports/lint.sarif: download reports/lint.sarif: file does not exist", ExitCode: code(0)}},
		{name: "stale parse_file from an earlier run is not read", check: "run = [\"lint\"]\nparse = \"sarif\"\nparse_file = \"reports/lint.sarif\"",
			files: map[string][]byte{"reports/lint.sarif": []byte(sarifOneResult)}, res: providers.ExecResult{ExitCode: 2},
			want: summary{Status: result.StatusFail, Reason: "exit code 2, expected 0; read parse_file reports/lint.sarif: download reports/lint.sarif: file does not exist", ExitCode: code(2), Score: &zero}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := mustParseTOML(t, "name = \"gate\"\n[[check]]\nid = \"c\"\n"+tt.check+"\n")
			sb := &fakeSandbox{files: map[string][]byte{}}
			maps.Copy(sb.files, tt.files)
			sb.exec = func(context.Context, providers.Cmd) (providers.ExecResult, error) {
				sb.mu.Lock()
				maps.Copy(sb.files, tt.write)
				sb.mu.Unlock()
				return tt.res, tt.err
			}
			rec := &recorder{}
			items := RunChecks(t.Context(), sb, r, rec)
			if r.Checks[0].ParseFile != "" {
				sb.calls = sb.calls[1:] // the removal of an earlier run's parse_file
			}
			tt.want.ID = "c"
			if diff := cmp.Diff([]summary{tt.want}, summarize(items)); diff != "" {
				t.Errorf("RunChecks mismatch (-want +got):\n%s", diff)
			}
			if got, want := sb.argvs(), [][]string{r.Checks[0].Argv}; !cmp.Equal(got, want) {
				t.Errorf("Exec argv = %q, want %q", got, want)
			}
			if sb.calls[0].Timeout != r.Checks[0].Timeout {
				t.Errorf("Exec timeout = %v, want %v", sb.calls[0].Timeout, r.Checks[0].Timeout)
			}
			started, finished := rec.ofType(events.CheckStarted), rec.ofType(events.CheckFinished)
			if len(started) != 1 || len(finished) != 1 {
				t.Fatalf("events: %d started, %d finished, want 1 and 1", len(started), len(finished))
			}
			if ev := finished[0].Data.(CheckEvent); ev.Status != tt.want.Status || ev.ID != "c" {
				t.Errorf("CheckFinished data = %+v, want id c, status %s", ev, tt.want.Status)
			}
			if items[0].Kind != KindCheck || !items[0].Required || items[0].Weight != 1 {
				t.Errorf("item = %+v: want kind check, required, weight 1", items[0])
			}
		})
	}
}

func TestRunChecksFindingContext(t *testing.T) {
	t.Parallel()
	r := mustParseTOML(t, "name = \"gate\"\n[[check]]\nid = \"lint\"\nrun = [\"lint\"]\nparse = \"sarif\"\n")
	sb := &fakeSandbox{exec: func(context.Context, providers.Cmd) (providers.ExecResult, error) {
		return providers.ExecResult{Stdout: []byte(sarifOneResult)}, nil
	}}
	items := RunChecks(t.Context(), sb, r, nil)
	want := []result.Finding{{
		Path: "a.tf", StartLine: 3, Severity: result.SeverityError, Rule: "R1", Message: "bad thing", Source: "check:lint",
		Fingerprint: Fingerprint("gate", "lint", "R1", "a.tf", "bad thing"),
	}}
	if diff := cmp.Diff(want, items[0].Findings); diff != "" {
		t.Errorf("findings mismatch (-want +got):\n%s", diff)
	}
}

func TestRunChecksOutput(t *testing.T) {
	t.Parallel()
	r := mustParseTOML(t, "[[check]]\nid = \"noisy\"\nrun = \"make\"\n")
	var big strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&big, "line %04d é\n", i)
	}
	big.WriteString("last line, no newline")
	sb := &fakeSandbox{exec: func(context.Context, providers.Cmd) (providers.ExecResult, error) {
		return providers.ExecResult{ExitCode: 2, Stdout: []byte(big.String()), Stderr: []byte("error: s3cr3t leaked\r\n")}, nil
	}}
	rec := &recorder{}
	items := Checker{Redact: func(s string) string { return strings.ReplaceAll(s, "s3cr3t", "***") }}.Run(t.Context(), sb, r, rec)
	c := items[0].Check
	if len(c.StdoutTail) > TailBytes || !strings.HasPrefix(c.StdoutTail, "...(truncated)\n") || !strings.HasSuffix(c.StdoutTail, "line 2999 é\nlast line, no newline") {
		t.Errorf("stdout tail (%d bytes) = %q...%q: want at most %d bytes, marked, ending with the output's end",
			len(c.StdoutTail), c.StdoutTail[:40], c.StdoutTail[len(c.StdoutTail)-40:], TailBytes)
	}
	if c.StderrTail != "error: *** leaked\r\n" {
		t.Errorf("stderr tail = %q, want the redacted stderr", c.StderrTail)
	}
	var lines []string
	for _, e := range rec.ofType(events.Output) {
		if d := e.Data.(OutputLine); d.Check != "noisy" {
			t.Errorf("output event for check %q, want noisy", d.Check)
		}
		lines = append(lines, e.Message)
	}
	if !slices.Contains(lines, "line 0000 é") || !slices.Contains(lines, "error: *** leaked") {
		t.Errorf("output events miss the first stdout line or the redacted stderr line")
	}
	if slices.Contains(lines, "line 2999 é") {
		t.Errorf("output events were not capped at %d lines per stream", maxStreamLines)
	}
	if n := len(lines); n != maxStreamLines+2 { // capped stdout + the notice + 1 stderr line
		t.Errorf("%d output events, want %d", n, maxStreamLines+2)
	}
}

func TestRunChecksCancel(t *testing.T) {
	t.Parallel()
	r := mustParseTOML(t, "[[check]]\nid = \"a\"\nrun = \"sleep 600\"\n[[check]]\nid = \"b\"\nrun = \"true\"\n[[check]]\nid = \"c\"\nrun = \"true\"\n")
	ctx, cancel := context.WithCancelCause(t.Context())
	started := make(chan struct{})
	sb := &fakeSandbox{exec: func(ctx context.Context, _ providers.Cmd) (providers.ExecResult, error) {
		close(started)
		<-ctx.Done()
		return providers.ExecResult{}, fmt.Errorf("exec: %w", ctx.Err())
	}}
	go func() {
		<-started
		cancel(errors.New("SIGTERM"))
	}()
	done := make(chan []result.Item)
	go func() { done <- RunChecks(ctx, sb, r, nil) }()
	var items []result.Item
	select {
	case items = <-done:
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("RunChecks did not return after cancellation")
	}
	want := []summary{
		{ID: "a", Status: result.StatusError, Reason: "interrupted while running: SIGTERM"},
		{ID: "b", Status: result.StatusSkipped, Reason: "not run: SIGTERM"},
		{ID: "c", Status: result.StatusSkipped, Reason: "not run: SIGTERM"},
	}
	if diff := cmp.Diff(want, summarize(items)); diff != "" {
		t.Errorf("RunChecks after cancel mismatch (-want +got):\n%s", diff)
	}
	if n := len(sb.argvs()); n != 1 {
		t.Errorf("Exec called %d times, want 1", n)
	}

	// A context cancelled before the first check runs nothing.
	dead, stop := context.WithCancel(t.Context())
	stop()
	sb2 := &fakeSandbox{exec: func(context.Context, providers.Cmd) (providers.ExecResult, error) {
		t.Error("Exec called on a cancelled context")
		return providers.ExecResult{}, nil
	}}
	for _, it := range RunChecks(dead, sb2, r, nil) {
		if it.Status != result.StatusSkipped || !strings.Contains(it.Reason, "context canceled") {
			t.Errorf("item %s = %s (%s), want skipped: context canceled", it.ID, it.Status, it.Reason)
		}
	}
}

// TestRunChecksRealProcesses runs checks as real processes through a minimal host
// sandbox: argv and shell forms, exit codes, a timeout, and the cancellation of a running
// process tree.
func TestRunChecksRealProcesses(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	writeFile(t, dir, "go.mod", "module example.com/x\n")
	r := mustParseTOML(t, `
[[check]]
id  = "argv"
run = ["grep", "-q", "^module example.com/x$", "go.mod"]

[[check]]
id  = "shell"
run = 'echo "to stdout"; echo "to stderr" >&2; exit 3'
expect_exit = 3

[[check]]
id  = "missing-file"
run = ["test", "-f", "nope"]

[[check]]
id      = "slow"
run     = "sleep 30"
timeout = "200ms"
`)
	rec := &recorder{}
	items := RunChecks(t.Context(), newHostSandbox(t, dir), r, rec)
	code := func(c int) *int { return &c }
	one, zero := 1.0, 0.0
	want := []summary{
		{ID: "argv", Status: result.StatusPass, ExitCode: code(0), Score: &one},
		{ID: "shell", Status: result.StatusPass, ExitCode: code(3), Score: &one},
		{ID: "missing-file", Status: result.StatusFail, Reason: "exit code 1, expected 0", ExitCode: code(1), Score: &zero},
		{ID: "slow", Status: result.StatusFail, Reason: "timed out after 200ms", ExitCode: code(124), TimedOut: true, Score: &zero},
	}
	if diff := cmp.Diff(want, summarize(items)); diff != "" {
		t.Errorf("RunChecks mismatch (-want +got):\n%s", diff)
	}
	if got := items[1].Check; got.StdoutTail != "to stdout\n" || got.StderrTail != "to stderr\n" {
		t.Errorf("shell check tails = %q / %q", got.StdoutTail, got.StderrTail)
	}
	var out []string
	for _, e := range rec.ofType(events.Output) {
		out = append(out, e.Data.(OutputLine).Stream+": "+e.Message)
	}
	slices.Sort(out)
	if diff := cmp.Diff([]string{"stderr: to stderr", "stdout: to stdout"}, out); diff != "" {
		t.Errorf("output events mismatch (-want +got):\n%s", diff)
	}
}

func TestExampleRubric(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("gofmt"); err != nil {
		t.Skip("gofmt not on PATH")
	}
	r, err := Parse("../examples/checks.toml", ".")
	if err != nil {
		t.Fatalf("Parse(examples/checks.toml): %v", err)
	}
	clean := t.TempDir()
	writeFile(t, clean, "go.mod", "module github.com/talkops/talkops\n\ngo 1.26\n")
	writeFile(t, clean, "README.md", "# talkops\n")
	writeFile(t, clean, "main.go", "package main\n\nfunc main() {}\n")
	writeFile(t, clean, ".git/objects/pack/big", strings.Repeat("x", 6<<20)) // .git is not checked

	broken := t.TempDir()
	writeFile(t, broken, "go.mod", "module example.com/other\n")
	writeFile(t, broken, "main.go", "package main\nfunc main( ) {}\n")
	big, err := os.Create(filepath.Join(broken, "dump.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(6 << 20); err != nil {
		t.Fatal(err)
	}
	big.Close()

	tests := []struct {
		dir        string
		wantStatus []result.ItemStatus
		wantScore  result.RubricStatus
	}{
		{clean, []result.ItemStatus{"pass", "pass", "pass", "pass"}, result.RubricSatisfied},
		{broken, []result.ItemStatus{"fail", "fail", "fail", "fail"}, result.RubricFailed},
	}
	for _, tt := range tests {
		items := RunChecks(t.Context(), newHostSandbox(t, tt.dir), r, nil)
		var got []result.ItemStatus
		for _, it := range items {
			got = append(got, it.Status)
		}
		if diff := cmp.Diff(tt.wantStatus, got); diff != "" {
			t.Errorf("examples/checks.toml in %s (-want +got):\n%s\n%+v", tt.dir, diff, items)
		}
		if _, status := Score(items, r.PassThreshold); status != tt.wantScore {
			t.Errorf("Score = %s, want %s", status, tt.wantScore)
		}
	}
	if got := items(t, r, broken)[1].Check.StdoutTail; got != "main.go\n" {
		t.Errorf("gofmt check output = %q, want the unformatted file listed", got)
	}
}

func items(t *testing.T, r *Rubric, dir string) []result.Item {
	return RunChecks(t.Context(), newHostSandbox(t, dir), r, nil)
}

func TestRunChecksWithoutSandbox(t *testing.T) {
	t.Parallel()
	r := mustParseTOML(t, "[[check]]\nid = \"a\"\nrun = \"true\"\n")
	items := RunChecks(t.Context(), nil, r, nil)
	if len(items) != 1 || items[0].Status != result.StatusError || items[0].Reason != "could not run: no sandbox" {
		t.Errorf("RunChecks(nil sandbox) = %+v, want one error item", items)
	}
}
