package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/internal/exit"
	"github.com/talkops/talkops/internal/version"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/builtin"
	"github.com/talkops/talkops/reaper"
	"github.com/talkops/talkops/runner"
)

// cli is the kong grammar. Each command's Run calls into one package.
type cli struct {
	Run      runCmd      `cmd:"" default:"withargs" help:"Run the pipeline: provision, sync, setup, the agent on the prompt, the rubric, the verdict, teardown (the default command)."`
	Report   ReportCmd   `cmd:"" help:"Publish a finished run's result.json (reports, GitHub, GitLab) without running anything."`
	Sandbox  SandboxCmd  `cmd:"" help:"List or garbage-collect sandboxes talkops created."`
	Provider ProviderCmd `cmd:"" help:"Check a sandbox provider (built-in or custom) against the sandbox contract."`
	Config   configCmd   `cmd:"" help:"Print the resolved configuration, each value with its source."`
	Version  versionCmd  `cmd:"" help:"Print the version and commit."`
}

// app is everything the program takes from its process: I/O, environment, working
// directory, the providers it may build, and the channel a second signal closes. main
// fills it from the process; tests fill it themselves and call the same run.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	workDir        string
	providers      builtin.Registry
	force          <-chan struct{} // closed when the user insists (a second signal)
}

// kongExit is thrown by kong's Exit hook (after --help) and caught in run.
type kongExit struct{ code int }

// run is the whole program: it parses args and runs the command, and returns an error
// whose exit code main uses.
func (a *app) run(ctx context.Context, args []string) (err error) {
	stdout, stderr := a.stdout, a.stderr
	var grammar cli
	parser, err := kong.New(&grammar,
		kong.Name("talkops"),
		kong.Description("Run an AI DevOps agent headless in an ephemeral sandbox, score the outcome against a rubric, publish the verdict, and always tear the sandbox down."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(kongExit{code}) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true}),
		kong.Help(helpWithRunFlags),
		helpVars(),
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.Bind(a),
		kong.Bind(reaper.ListerFunc(a.listers)),
	)
	if err != nil {
		return fmt.Errorf("build command line: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			ke, ok := p.(kongExit)
			if !ok {
				panic(p)
			}
			err = nil
			if ke.code != 0 {
				err = &exit.Error{Code: runner.ExitUsage, Reported: true}
			}
		}
	}()
	kctx, err := parser.Parse(normalizeArgs(args, append(a.providers.Names(), config.PluginNames(a.getenv("HOME"))...)))
	if err != nil {
		fmt.Fprintf(stderr, "talkops: %v\n", err)
		fmt.Fprintln(stderr, "Run 'talkops --help' for usage.")
		return exit.Reported(runner.ExitUsage, err)
	}
	grammar.Run.flagsSet = setFlags(kctx)
	return kctx.Run()
}

// sandboxBare is what a bare --sandbox becomes: "use the configured default".
const sandboxBare = "\x00default"

// normalizeArgs gives --sandbox its optional value: `--sandbox` alone, or followed by a
// flag or a word that is not a provider name, means the configured default; TalkOps's
// flag swallowed the next word (a prompt) instead.
func normalizeArgs(args []string, providerNames []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			out = append(out, args[i:]...)
			break
		}
		if arg != "--sandbox" {
			out = append(out, arg)
			continue
		}
		if i+1 < len(args) && (slices.Contains(providerNames, args[i+1]) || config.Suggest(args[i+1], providerNames) != "") {
			// A provider name, or a typo of one ("dokcer"): the value, which config
			// then rejects with a did-you-mean instead of running the default provider
			// on a one-word prompt.
			out = append(out, "--sandbox="+args[i+1])
			i++
			continue
		}
		out = append(out, "--sandbox="+sandboxBare)
	}
	return out
}

// helpWithRunFlags is kong's help, and at the top level also the run command's: run is
// the default command, and `talkops -p ...` is how it is used.
func helpWithRunFlags(o kong.HelpOptions, kctx *kong.Context) error {
	if err := kong.DefaultHelpPrinter(o, kctx); err != nil {
		return err
	}
	if kctx.Selected() != nil {
		return nil
	}
	runCtx, err := kong.Trace(kctx.Kong, []string{"run"})
	if err != nil {
		return err
	}
	fmt.Fprintln(kctx.Stdout, "\nThe default command, run (talkops [run] [flags] [PROMPT...]):")
	fmt.Fprintln(kctx.Stdout)
	return kong.DefaultHelpPrinter(o, runCtx)
}

// setFlags returns the flags the user gave, by name.
func setFlags(kctx *kong.Context) map[string]*kong.Flag {
	set := map[string]*kong.Flag{}
	for _, f := range kctx.Flags() {
		if f.Set {
			set[f.Name] = f
		}
	}
	return set
}

// helpVars renders each config key's sources for the flags' help (${cfg_KEY}).
func helpVars() kong.Vars {
	vars := kong.Vars{"providers": strings.Join(builtin.Providers().Names(), ", ")}
	for _, k := range config.Keys() {
		vars["cfg_"+strings.ReplaceAll(k.Name, ".", "_")] = k.Sources()
	}
	return vars
}

type versionCmd struct{}

func (versionCmd) Run(a *app) error {
	v := version.Get()
	fmt.Fprintf(a.stdout, "talkops %s\ncommit %s\n", v.Version, v.Commit)
	return nil
}

type configCmd struct{}

func (configCmd) Run(a *app) error {
	cfg, err := config.Load(a.configOptions(nil, nil))
	if err != nil {
		return err
	}
	return config.Print(a.stdout, cfg)
}

// configOptions are the configuration's inputs from this process, with flags on top.
func (a *app) configOptions(flags, flagNames map[string]string) config.Options {
	return config.Options{Flags: flags, FlagNames: flagNames, Getenv: a.getenv, WorkDir: a.workDir,
		HomeDir: a.getenv("HOME"), Providers: a.providers.Names()}
}

// listers builds the providers that can list what talkops created, for `talkops sandbox
// ls|gc`: the named ones, or the configured one and the ledger's.
func (a *app) listers(ctx context.Context, names, ledger []string) (map[string]providers.Lister, error) {
	cfg, err := config.Load(a.configOptions(nil, nil))
	if err != nil {
		return nil, err
	}
	return a.providers.Listers(ctx, cfg, names, ledger, a.getenv)
}
