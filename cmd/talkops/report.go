package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/talkops/talkops/internal/exit"
	"github.com/talkops/talkops/report"
	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/runner"
)

// ReportCmd is `talkops report --from result.json`: publish a finished run — derived
// files, GitHub, GitLab, as the environment says — without running anything. It is the
// privileged half of the fork-safe pipeline (a workflow_run job holding the write token).
type ReportCmd struct {
	From            string `name:"from" required:"" placeholder:"FILE" help:"result.json of a finished run (validated against its schema before use)."`
	ReportDir       string `name:"report-dir" placeholder:"DIR" help:"Where summary.md, junit.xml, gl-code-quality-report.json, results.sarif and findings.rdjsonl go (default: the directory of --from)."`
	ErrorConclusion string `name:"error-conclusion" enum:"failure,neutral" default:"failure" help:"GitHub check-run conclusion when the run reached no verdict, ran out of budget or failed on an unstable judge (${enum}). Branch protection counts neutral as passing, so neutral is not a gate."`
	CheckName       string `name:"check-name" placeholder:"NAME" default:"talkops" help:"Name of the GitHub check run; never taken from the artifact, which the run being reported could write."`
	NoCheckRun      bool   `name:"no-check-run" help:"Do not create a GitHub check run."`
	NoComment       bool   `name:"no-comment" help:"Do not write the sticky PR comment or GitLab merge-request note."`
	ExitCode        bool   `name:"exit-code" help:"Exit with the run's exit code instead of 0 once published."`
}

// Run reads, validates and publishes result.json.
func (c *ReportCmd) Run(ctx context.Context, a *app) error {
	from := absIn(a.workDir, c.From)
	dir := filepath.Dir(from)
	if c.ReportDir != "" {
		dir = absIn(a.workDir, c.ReportDir)
	}
	opts := report.Options{
		Dir:             dir,
		Getenv:          a.getenv,
		Stdout:          a.stdout,
		ErrorConclusion: c.ErrorConclusion,
		CheckName:       c.CheckName,
		NoCheckRun:      c.NoCheckRun,
		NoComment:       c.NoComment,
	}
	if err := report.MaskSecrets(opts); err != nil {
		fmt.Fprintf(a.stderr, "talkops: %v\n", err)
	}
	r, err := report.PublishFrom(ctx, from, opts)
	if r == nil {
		if errors.Is(err, result.ErrInvalid) || errors.Is(err, fs.ErrNotExist) {
			return runner.Usagef("--from %s: %w", c.From, err)
		}
		return err
	}
	red := hygiene.NewRedactor(report.SecretsFromEnv(a.getenv, os.Environ)...)
	fmt.Fprintf(a.stderr, "talkops: published %s: %s\n", c.From, render.Headline(r, red))
	if err != nil {
		return fmt.Errorf("publish %s: %w", c.From, err)
	}
	if c.ExitCode && r.ExitCode != 0 {
		return exit.Reported(r.ExitCode, errors.New(r.Verdict))
	}
	return nil
}

// absIn resolves a relative path against dir.
func absIn(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
