package main

import (
	"cmp"
	"context"
	"os"
	"path/filepath"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/session"
	"github.com/talkops/talkops/changeset"
	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/internal/prompt"
	"github.com/talkops/talkops/internal/version"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/builtin"
	"github.com/talkops/talkops/providers/cache"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/providers/state"
	"github.com/talkops/talkops/providers/workspace"
	"github.com/talkops/talkops/report"
	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/rubric/gate"
	"github.com/talkops/talkops/runner"
)

// plan validates the inputs and builds the runner's options, each part from the ones
// before it. Everything here happens before provisioning, so every failure is a usage
// error and nothing leaks.
func (c *runCmd) plan(ctx context.Context, a *app, cfg *config.Config, runID string, sink events.Sink) (runner.Options, error) {
	v := version.Get()
	opts := runner.Options{
		RunID:         runID,
		Version:       v.Version,
		Commit:        v.Commit,
		ProjectDir:    cfg.ProjectDir,
		ReportDir:     cfg.ReportDir(runID),
		ProviderName:  cfg.Sandbox.Provider,
		AttachID:      cfg.Sandbox.ID,
		Timeout:       cfg.Run.Timeout,
		Config:        cfg.Values(),
		Advisory:      c.Advisory,
		CI:            report.CI(a.getenv),
		MaxIterations: 1,
		Verify:        cfg.Rubric.Verify,
		Ledger:        &state.Ledger{Dir: state.DefaultDir(a.getenv), Provider: cfg.Sandbox.Provider, ProjectDir: cfg.ProjectDir},
	}
	w, err := c.planWork(a, cfg, opts.ReportDir, sink)
	if err != nil {
		return opts, err
	}
	opts.Prompt, opts.Redact = w.prompt, w.redact
	caps, err := c.planSandbox(ctx, a, cfg, &opts, w.session != nil, sink)
	if err != nil {
		return opts, err
	}
	if err := c.planReports(&opts); err != nil {
		return opts, err
	}
	var host *changeset.Recorder
	if w.session != nil {
		opts.NewAgent = w.session.NewAgent
		// Exec output of the cloud providers arrives as JSON text, not bytes: their
		// archive goes through a file and Download.
		host = &changeset.Recorder{Skip: changeset.SkipUnder(reportDirIn(cfg.ProjectDir, opts.ReportDir)), ViaFile: !caps.BinaryOutput}
		if w.rubric != nil {
			host.Protected = w.rubric.IsProtected
		}
		opts.Workspace = host
		opts.CleanRoom, opts.NoCleanRoom = runner.CleanRoomFor(cfg.Sandbox.Provider, opts.AttachID, cfg.Sandbox.Provider == local.Name, caps.OwnFilesystem)
	}
	if w.rubric != nil {
		g := gate.Options{Rubric: w.rubric, Checker: rubric.Checker{Redact: w.redact}, Judge: w.judge,
			MaxIterations: int(cfg.Rubric.MaxIterations), Workspace: host}
		if w.session == nil {
			g.MaxIterations = 1 // no agent can revise: a failed evaluation is final, never needs_revision
		} else {
			g.Agent = w.session.Record
			opts.MaxIterations = int(cfg.Rubric.MaxIterations)
		}
		opts.Rubric = gate.New(g)
	}
	return opts, nil
}

// work is what the run is for.
type work struct {
	prompt  string
	session *session.Session // nil: no prompt, no agent
	rubric  *rubric.Rubric   // nil: no rubric
	judge   rubric.Judge     // nil: the rubric has no criteria
	redact  func(string) string
}

// planWork resolves the prompt and its agent, the rubric and its judge. The agent's model
// is built first, because the judge defaults to it.
func (c *runCmd) planWork(a *app, cfg *config.Config, reportDir string, sink events.Sink) (work, error) {
	var w work
	if c.Prompt != "" && c.NonInteractive != "" {
		return w, runner.Usagef("give the prompt once: -p/--prompt or -n")
	}
	text, err := prompt.Resolve(prompt.Input{
		Flag: cmp.Or(c.Prompt, c.NonInteractive), Positional: c.Words, File: c.PromptFile,
		ReadFile: prompt.ReadFile, Stdin: a.stdin,
	})
	if err != nil {
		return w, err
	}
	if text == "" && c.Rubric == "" {
		return w, runner.Usagef("nothing to do: give a prompt (-p \"...\") for the agent, a rubric (--rubric) to check, or both")
	}
	w.prompt = text
	servers, err := session.MCPServers(cfg, c.MCPConfig, a.getenv)
	if err != nil {
		return w, err
	}
	// Env and header values of MCP servers are secrets like the API keys.
	c.report.Secrets = append(c.report.Secrets, servers.Secrets...)
	redactor := hygiene.NewRedactor(c.report.Secrets...)
	w.redact = redactor.Redact

	newModel := func(spec string) (model.Model, string, error) {
		m, err := session.NewModel(spec, cfg.Model.BaseURL, a.getenv)
		if err != nil {
			return nil, "", err
		}
		return m, session.ModelName(spec, m), nil
	}
	var agentModel model.Model
	agentSpec := cfg.Model.Name
	if text != "" {
		if agentModel, agentSpec, err = newModel(agentSpec); err != nil {
			return w, err
		}
	}
	if c.Rubric != "" {
		if w.rubric, err = rubric.Parse(rubric.ResolveSpec(c.Rubric, a.workDir), cfg.ProjectDir); err != nil {
			return w, err
		}
		if len(w.rubric.Criteria) > 0 {
			if w.judge, err = gate.NewJudge(cfg, w.rubric, agentModel, agentSpec, newModel, redactor.Redact, sink); err != nil {
				return w, err
			}
		}
	}
	if text == "" {
		return w, nil
	}
	w.session, err = session.FromConfig(cfg, text, agentModel, agentSpec, reportDir, servers, c.report.Secrets, redactor, sink)
	return w, err
}

// planSandbox builds the provider and checks that the sandbox flags make sense for it,
// then the spec, the setup script and the workspace sync.
func (c *runCmd) planSandbox(ctx context.Context, a *app, cfg *config.Config, opts *runner.Options, withAgent bool, sink events.Sink) (providers.Capabilities, error) {
	name := cfg.Sandbox.Provider
	prov, err := a.providers.Build(cfg, name, a.getenv)
	if err != nil {
		return providers.Capabilities{}, err
	}
	opts.Provider = prov
	if name == local.Name && withAgent && cfg.Approval.Mode == "yes" {
		session.WarnLocalKeys(a.getenv, sink)
	}
	caps := providers.CapabilitiesOf(prov)
	snapshot, err := builtin.Snapshot(cfg, caps)
	if err != nil {
		return caps, err
	}
	opts.Spec = runner.NewSpec(opts.RunID, cfg.ProjectDir, snapshot, cfg.Providers[name].WorkingDir, cfg.Run.Timeout)
	opts.Spec.Env = cfg.Sandbox.EnvFor(a.getenv)
	if cfg.Sandbox.SetupScript != "" {
		if opts.SetupScript, err = runner.LoadSetupScript(cfg.Sandbox.SetupScript); err != nil {
			return caps, err
		}
	}
	caches, cacheNotes, err := cache.Resolve(ctx, cfg.Sandbox.Caches, a.getenv)
	if err != nil {
		return caps, runner.Usagef("[sandboxes] caches (from %s): %v", cfg.Source(config.KeyCaches), err)
	}
	opts.Spec.Caches = caches
	if cfg.Sandbox.SyncWorkspace && caps.OwnFilesystem && opts.AttachID == "" {
		opts.Sync = runner.WorkspaceSyncer(runner.SyncOptions{
			Root: cfg.ProjectDir, Provider: name, CachesWanted: len(cfg.Sandbox.Caches) > 0, CacheNotes: cacheNotes,
			Workspace: workspace.Options{Include: cfg.Sandbox.Sync.Include, Exclude: cfg.Sandbox.Sync.Exclude, MaxFileSize: cfg.Sandbox.Sync.MaxFileSize,
				ReportDir: reportDirIn(cfg.ProjectDir, opts.ReportDir)},
		})
	}
	return caps, nil
}

// planReports creates the report directory (a failure is a usage error: nothing has been
// provisioned yet) and picks the publishers for this environment.
func (c *runCmd) planReports(opts *runner.Options) error {
	if err := os.MkdirAll(opts.ReportDir, 0o755); err != nil {
		return runner.Usagef("--report-dir %s: %v", opts.ReportDir, err)
	}
	c.report.Dir, c.report.ResultPath = opts.ReportDir, filepath.Join(opts.ReportDir, "result.json")
	opts.Publishers = append(opts.Publishers, report.Detect(c.report)...)
	return nil
}

// reportDirIn is the report directory relative to the project (slash-separated) when it
// lies inside it, else "".
func reportDirIn(projectDir, reportDir string) string {
	if rel, err := filepath.Rel(projectDir, reportDir); err == nil && filepath.IsLocal(rel) {
		return filepath.ToSlash(rel)
	}
	return ""
}
