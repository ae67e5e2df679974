package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/talkops/talkops/internal/exit"
	"github.com/talkops/talkops/report"
	"github.com/talkops/talkops/result"
)

// runReport parses args with a grammar holding only ReportCmd and runs it.
func runReport(t *testing.T, dir string, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	getenv := func(k string) string { return env[k] }
	a := &app{stdout: &stdout, stderr: &stderr, getenv: getenv, workDir: dir, providers: testRegistry(getenv)}
	var grammar struct {
		Report ReportCmd `cmd:""`
	}
	parser, err := kong.New(&grammar, kong.Name("talkops"), kong.Writers(&stdout, &stderr),
		kong.BindTo(t.Context(), (*context.Context)(nil)), kong.Bind(a),
		kong.Exit(func(int) { t.Fatalf("kong exited: %s", stderr.String()) }))
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := parser.Parse(append([]string{"report"}, args...))
	if err != nil {
		return stdout.String(), stderr.String(), err
	}
	err = kctx.Run()
	return stdout.String(), stderr.String(), err
}

func writeResult(t *testing.T, dir string) {
	t.Helper()
	score := 0.25
	r := &result.Result{Schema: result.Schema, Verdict: result.VerdictFail, Score: &score, ExitCode: 1,
		Run: result.Run{ID: "r1", Version: "0.3.0", StartedAt: time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)},
		Findings: []result.Finding{{Path: "main.tf", StartLine: 3, Severity: "error", Message: "open ingress",
			Source: "agent", Fingerprint: "f1"}}}
	if _, err := result.Write(dir, r); err != nil {
		t.Fatal(err)
	}
}

func TestReportFrom(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeResult(t, filepath.Join(dir, "in"))
	out := filepath.Join(dir, "out")
	env := map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_abcdefghijklmnopqrstuvwxyz0123456789"}
	stdout, stderr, err := runReport(t, dir, env, "--from", "in/result.json", "--report-dir", "out")
	if err != nil {
		t.Fatalf("report --from = %v\n%s", err, stderr)
	}
	for _, name := range []string{report.SummaryFile, report.JUnitFile, report.CodeQualityFile, report.SARIFFile, report.RDJSONLFile} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Errorf("%s not written: %v", name, err)
		}
	}
	if !strings.Contains(stdout, "::add-mask::ghs_") || !strings.Contains(stdout, "::error endLine=3,file=main.tf,line=3::open ingress") {
		t.Errorf("stdout lacks the mask or the annotation:\n%s", stdout)
	}
	if !strings.Contains(stderr, "published in/result.json: fail") {
		t.Errorf("stderr = %q", stderr)
	}
}

func TestReportFromExitCode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeResult(t, dir)
	_, _, err := runReport(t, dir, nil, "--from", "result.json", "--exit-code")
	if got := exit.Code(err); got != 1 {
		t.Errorf("report --exit-code on a failed run: exit %d (%v), want 1", got, err)
	}
}

func TestReportFromInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "result.json")
	if err := os.WriteFile(bad, []byte(`{"schema":"talkops.result/v1","verdict":"maybe"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{"result.json", "missing.json"} {
		_, _, err := runReport(t, dir, nil, "--from", from)
		if !exit.IsUsage(err) || !strings.Contains(err.Error(), "--from "+from) {
			t.Errorf("report --from %s = %v, want a usage error naming the flag", from, err)
		}
		if from == "result.json" && !errors.Is(err, result.ErrInvalid) {
			t.Errorf("report --from invalid = %v, want ErrInvalid", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, report.SummaryFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("files were derived from an invalid result.json")
	}
}
