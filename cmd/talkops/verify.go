package main

import (
	"path/filepath"
	"strings"

	"github.com/talkops/talkops/changeset"
	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/runner"
)

// planVerification sets up the host-side workspace record of a run with an agent and
// picks how this provider makes a clean room for the checks.
func (c *runCmd) planVerification(_ *app, cfg *config.Config, opts *runner.Options, _ events.Sink) error {
	opts.Verify = cfg.Rubric.Verify
	if opts.NewAgent == nil {
		return nil
	}
	// talkops' own files in the workspace are not the agent's changes: the report
	// directory when it lies inside the project, and the setup script's directory.
	skip := []string{".talkops/tmp"}
	if rel, err := filepath.Rel(cfg.ProjectDir, opts.ReportDir); err == nil && filepath.IsLocal(rel) {
		skip = append(skip, filepath.ToSlash(rel))
	}
	rec := &changeset.Recorder{Skip: func(p string) bool {
		for _, s := range skip {
			if p == s || strings.HasPrefix(p, s+"/") {
				return true
			}
		}
		return false
	}}
	if rr, ok := opts.Rubric.(*rubricRunner); ok {
		rec.Protected = rr.r.IsProtected
		rr.host = rec
	}
	// Exec output of the cloud providers arrives as JSON text, not bytes: their archive
	// goes through a file and Download.
	rec.ViaFile = !c.caps.BinaryOutput
	opts.Workspace = rec
	switch {
	case opts.AttachID != "":
		opts.NoCleanRoom = "the run attached to an existing sandbox (--sandbox-id), whose state a new sandbox cannot reproduce"
	case cfg.Sandbox.Provider == local.Name:
		opts.CleanRoom = runner.CleanRoomMaterialized
	case c.caps.OwnFilesystem:
		opts.CleanRoom = runner.CleanRoomProvisioned
	default:
		opts.NoCleanRoom = "the " + cfg.Sandbox.Provider + " provider cannot create a second sandbox"
	}
	return nil
}
