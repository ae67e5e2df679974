// Package config resolves talkops' settings from flags, the environment, the project and
// user config.toml files and defaults, remembering where every value came from.
//
// Precedence, highest first: flags, TALKOPS_* environment variables, the unprefixed
// SANDBOX_* variables, the project's .talkops/config.toml (found by walking up from the
// working directory to the repository root), the user's ~/.talkops/config.toml, and the
// defaults in the key table (Keys). An environment variable set to the empty string counts
// as unset, so CI templates that always define a variable do not override config files.
//
// Config files are strict: an unknown section or key, a value of the wrong type or an
// invalid value is an *Error naming file:line:column and, where there is a fixed set, the
// valid choices. Per-provider tables ([sandboxes.providers.NAME]) are kept as raw values
// with positions; each provider decodes its own options with ProviderTable.Decode.
package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/talkops/talkops/internal/fileread"
	"github.com/talkops/talkops/result"
)

// MaxFileBytes caps a config file; a real one is a few KiB.
const MaxFileBytes = 1 << 20

// Options says where Load looks for settings.
type Options struct {
	// Flags maps a config key ("sandboxes.default") to the raw value of the flag that sets
	// it, only for flags the user actually gave. The provider key given as "" is a bare
	// --sandbox: use the configured default provider.
	Flags map[string]string
	// FlagNames maps a config key to the flag's spelling for sources and errors
	// ("--sandbox"); a key without an entry shows as "--<key>".
	FlagNames map[string]string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// WorkDir is where the project search starts and what relative paths from flags and
	// the environment are resolved against; "" means the process's working directory.
	WorkDir string
	// HomeDir holds the user config (.talkops/config.toml); "" means os.UserHomeDir.
	HomeDir string
	// Providers are the valid provider names. nil accepts any name (for callers that
	// validate later); an empty non-nil slice accepts none.
	Providers []string
}

// Config is the resolved configuration.
type Config struct {
	Sandbox  Sandbox
	Run      Run
	Model    Model
	Agent    Agent
	Approval Approval
	Rubric   Rubric
	Redact   Redact
	// TrustProjectConfig lets the project file set trusted-only keys; only a flag, the
	// environment or the user file can turn it on.
	TrustProjectConfig bool
	// ProjectDir is the project root: the directory holding .talkops/config.toml, else
	// the repository root (the first directory with .git walking up), else WorkDir.
	ProjectDir string
	// ProjectFile and UserFile are the config files that were read ("" when absent).
	ProjectFile string
	UserFile    string
	// Providers holds each [sandboxes.providers.NAME] table, merged key by key across the
	// user and project files (a key in the project file replaces the user's).
	Providers map[string]ProviderTable
	// MCPServers holds each [mcp.servers.NAME] table; the agent's MCP package decodes it.
	// A project file may only add URL servers without headers (see mcpTrustedKeys) and
	// may not redefine a server of the user file.
	MCPServers map[string]MCPServerTable

	settings map[string]setting
}

// MCPServerTable is one [mcp.servers.NAME] table. Decode it with Decode, like a provider
// table; Errorf and Source point at its file:line.
type MCPServerTable struct {
	ProviderTable
	// Trusted is false for a server from the project file.
	Trusted bool
}

// Sandbox holds the [sandboxes] settings.
type Sandbox struct {
	// Provider is the sandbox provider's name.
	Provider string
	// ID is a running sandbox to attach to; "" creates a new one.
	ID string
	// Snapshot is what a new sandbox starts from. It is "" when ID is set: attaching
	// ignores a snapshot configured in a lower-precedence place.
	Snapshot string
	// SetupScript is the absolute path of an existing script, or "".
	SetupScript   string
	SyncWorkspace bool
	Image         string
	Sync          Sync
	// Env holds NAME=value pairs set in every sandbox command.
	Env []string
	// PassEnv names host variables whose values every sandbox command gets.
	PassEnv []string
	// Caches are preset names and host directories shared with isolating sandboxes.
	Caches []string
}

// EnvFor is what every sandbox command gets on top of the provider's base environment:
// Env, then the host values of PassEnv (a variable unset on the host is left out); nil
// when there is nothing.
func (s Sandbox) EnvFor(getenv func(string) string) map[string]string {
	env := map[string]string{}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, k := range s.PassEnv {
		if v := getenv(k); v != "" {
			env[k] = v
		}
	}
	if len(env) == 0 {
		return nil
	}
	return env
}

// PassedValues are the host values PassEnv brings into the sandbox: they are masked like
// secrets wherever talkops publishes text.
func (s Sandbox) PassedValues(getenv func(string) string) []string {
	var out []string
	for _, k := range s.PassEnv {
		if v := getenv(k); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Sync holds the [sandboxes.sync] settings.
type Sync struct {
	Include     []string
	Exclude     []string
	MaxFileSize int64
}

// Run holds the [run] settings.
type Run struct {
	// Timeout is the budget for the whole run; 0 means none.
	Timeout time.Duration
	// ReportDir is absolute.
	ReportDir    string
	OutputFormat string
	LogLevel     string
}

// Model holds the [model] settings.
type Model struct {
	Name    string
	BaseURL string
}

// Agent holds the [agent] settings: the agent's budgets.
type Agent struct {
	MaxTurns     int64
	MaxCostUSD   float64
	StallTimeout time.Duration
	ToolTimeout  time.Duration
}

// Approval holds the [approval] settings.
type Approval struct {
	Mode  string
	Allow []string
	Deny  []string
}

// Rubric holds the [rubric] settings.
type Rubric struct {
	Model         string
	MaxIterations int64
	Votes         int64
	// Verify is "clean" or "in-place".
	Verify string
}

// Redact holds the [redact] settings.
type Redact struct {
	// Env names environment variables whose values are secrets, from every layer.
	Env []string
}

// layer orders where a value can come from; a higher layer wins.
type layer int

const (
	layerDefault layer = iota
	layerUser
	layerProject
	layerEnv
	layerFlag
)

// source is where a resolved value came from.
type source struct {
	label string      // "flag --sandbox", "env X", "/abs/.talkops/config.toml:3", "default"
	file  *fileSource // nil unless from a config file
	line  int
	col   int
	val   pos    // the value's position in file
	base  string // what a relative path in the value is resolved against
	layer layer
}

type setting struct {
	val  any // string, bool, time.Duration, int64 or []string
	raw  any // the value as written, before paths were resolved
	src  source
	note string // shown after the source, e.g. why the value is not used
}

type loader struct {
	opts Options
	// builtin are the caller's provider names; opts.Providers grows by the custom
	// providers of the user config as it is read.
	builtin []string
	getenv  func(string) string
	workDir string
	home    string
}

// Load resolves the configuration. A mistake the user can fix is an *Error; other errors
// (an unreadable working directory) are wrapped plainly.
func Load(opts Options) (*Config, error) {
	l := &loader{opts: opts, builtin: opts.Providers, getenv: opts.Getenv}
	if l.getenv == nil {
		l.getenv = os.Getenv
	}
	wd := opts.WorkDir
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("config: working directory: %w", err)
		}
	}
	wd, err := filepath.Abs(wd)
	if err != nil {
		return nil, fmt.Errorf("config: working directory: %w", err)
	}
	l.workDir = wd
	l.home = opts.HomeDir
	if l.home == "" {
		// Without a home directory there is simply no user config file.
		l.home, _ = os.UserHomeDir()
	}
	if l.home != "" {
		l.home = filepath.Clean(l.home)
	}
	for name := range opts.Flags {
		if lookup(name) == nil {
			return nil, fmt.Errorf("config: flag value for unknown key %q", name)
		}
	}

	projectDir, projectFile, err := FindProject(wd, l.home)
	if err != nil {
		return nil, err
	}
	c := &Config{ProjectDir: projectDir, ProjectFile: projectFile, Providers: map[string]ProviderTable{}, MCPServers: map[string]MCPServerTable{}, settings: map[string]setting{}}

	var files []*fileValues // lowest precedence first
	if l.home != "" {
		userFile := filepath.Join(l.home, ".talkops", "config.toml")
		fv, err := l.readFile(userFile, layerUser)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			c.UserFile = userFile
			files = append(files, fv)
		}
	}
	if projectFile != "" {
		fv, err := l.readFile(projectFile, layerProject)
		if err != nil {
			return nil, err
		}
		files = append(files, fv)
	}

	trustProject, err := l.trustsProject(files)
	if err != nil {
		return nil, err
	}
	if len(files) > 0 && files[len(files)-1].layer == layerProject && !trustProject {
		if err := checkProjectTrust(files[len(files)-1], c.ProjectDir); err != nil {
			return nil, err
		}
	}
	for i := range keys {
		k := &keys[i]
		s, err := l.resolve(k, c.ProjectDir, files)
		if err != nil {
			return nil, err
		}
		c.settings[k.Name] = s
		assign(k.field(c), s.val)
	}
	if err := l.check(c); err != nil {
		return nil, err
	}
	for _, fv := range files {
		for name, pt := range fv.providers {
			if cur, ok := c.Providers[name]; ok {
				cur.merge(pt)
				c.Providers[name] = cur
			} else {
				c.Providers[name] = *pt
			}
		}
	}
	for _, fv := range files {
		for name, t := range fv.mcp {
			if prev, ok := c.MCPServers[name]; ok {
				// Merging would let a project file point a user's server, headers and all,
				// at another URL.
				return nil, t.errAt(nil, true, fmt.Sprintf("%s.%s: MCP server %q is already defined in %s; a project file cannot redefine it",
					mcpServersTable, name, name, prev.Source("")))
			}
			c.MCPServers[name] = MCPServerTable{ProviderTable: *t, Trusted: t.header.file.layer != layerProject}
		}
	}
	for name, pt := range c.Providers {
		pt.trustProject = trustProject
		pt.finish()
		c.Providers[name] = pt
	}
	return c, nil
}

// readFile reads and validates one config file. A missing file is fs.ErrNotExist.
func (l *loader) readFile(path string, ly layer) (*fileValues, error) {
	f := &fileSource{abs: path, layer: ly, base: filepath.Dir(filepath.Dir(path))}
	f.label, f.display = path, path
	if ly == layerUser {
		f.label = "~/.talkops/config.toml"
		f.display = f.label
	} else if rel, err := filepath.Rel(l.workDir, path); err == nil && filepath.IsLocal(rel) {
		f.display = rel
	}
	data, err := fileread.Read(path, MaxFileBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, &Error{File: f.display, Msg: "read config: " + unwrapPathError(err), Err: err}
	}
	doc, ix, err := decodeTOML(data)
	if err != nil {
		return nil, f.decodeError(err)
	}
	f.ix = ix
	return l.readDoc(f, doc)
}

func unwrapPathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// resolve finds the winning value for k: flag, environment, project file, user file,
// default.
func (l *loader) resolve(k *Key, projectDir string, files []*fileValues) (setting, error) {
	if k.Accumulate {
		return l.accumulate(k, files)
	}
	// A bare --sandbox (an empty provider flag) means the configured provider, and with
	// none configured the default one, as `talkops config` shows it.
	if raw, ok := l.flagValue(k); ok && !(k.Type == TypeProvider && raw == "") {
		src := source{label: "flag " + l.flagName(k), base: l.workDir, layer: layerFlag}
		return l.parseSetting(k, raw, src)
	}
	if s, ok, err := l.fromEnv(k); ok || err != nil {
		return s, err
	}
	for i := len(files) - 1; i >= 0; i-- {
		if s, ok := files[i].settings[k.Name]; ok {
			return s, nil
		}
	}
	v, err := parseText(k, k.Default, nil)
	if err != nil {
		return setting{}, fmt.Errorf("config: default of %s: %w", k.Name, err)
	}
	v = l.resolvePath(k, v, projectDir)
	return setting{val: v, src: source{label: "default", base: projectDir, layer: layerDefault}}, nil
}

// accumulate joins a list key's values from every layer, highest first, without
// duplicates; the source is the highest layer that set it.
func (l *loader) accumulate(k *Key, files []*fileValues) (setting, error) {
	var all []setting
	if raw, ok := l.flagValue(k); ok {
		s, err := l.parseSetting(k, raw, source{label: "flag " + l.flagName(k), base: l.workDir, layer: layerFlag})
		if err != nil {
			return setting{}, err
		}
		all = append(all, s)
	}
	for _, name := range k.Env {
		if raw := l.getenv(name); raw != "" {
			s, err := l.parseSetting(k, raw, source{label: "env " + name, base: l.workDir, layer: layerEnv})
			if err != nil {
				return setting{}, err
			}
			all = append(all, s)
		}
	}
	for i := len(files) - 1; i >= 0; i-- {
		if s, ok := files[i].settings[k.Name]; ok {
			all = append(all, s)
		}
	}
	if len(all) == 0 {
		return setting{val: []string(nil), src: source{label: "default", layer: layerDefault}}, nil
	}
	var names []string
	for _, s := range all {
		for _, v := range s.val.([]string) {
			if !slices.Contains(names, v) {
				names = append(names, v)
			}
		}
	}
	out := all[0]
	out.val = names
	if len(all) > 1 {
		out.note = "joined with every other layer"
	}
	return out, nil
}

func (l *loader) flagValue(k *Key) (string, bool) {
	if v, ok := l.opts.Flags[k.Name]; ok {
		return v, true
	}
	for _, a := range k.Aliases {
		if v, ok := l.opts.Flags[a]; ok {
			return v, true
		}
	}
	return "", false
}

func (l *loader) flagName(k *Key) string {
	if n := l.opts.FlagNames[k.Name]; n != "" {
		return n
	}
	return "--" + k.Name
}

func (l *loader) fromEnv(k *Key) (setting, bool, error) {
	for _, name := range k.Env {
		raw := l.getenv(name)
		if raw == "" {
			continue
		}
		s, err := l.parseSetting(k, raw, source{label: "env " + name, base: l.workDir, layer: layerEnv})
		return s, true, err
	}
	return setting{}, false, nil
}

// parseSetting parses a flag or environment value.
func (l *loader) parseSetting(k *Key, raw string, src source) (setting, error) {
	v, err := parseText(k, raw, l.opts.Providers)
	if err == nil {
		err = runCheck(k, v)
	}
	if err != nil {
		return setting{}, errFrom(src, k, err.Error(), err)
	}
	return setting{val: l.resolvePath(k, v, src.base), raw: v, src: src}, nil
}

// errFrom makes an *Error located at a setting's source.
func errFrom(src source, k *Key, msg string, err error) *Error {
	var e *Error
	if src.file != nil {
		p := src.val
		if p.line == 0 {
			p = pos{line: src.line, col: src.col}
		}
		e = src.file.errAt(p, k.Name, k.Name+": "+msg, err)
	} else {
		e = &Error{Source: src.label, Key: k.Name, Msg: msg, Err: err}
		if src.layer == layerDefault {
			e.Msg = k.Name + ": " + msg
		}
	}
	var ve *valueError
	if errors.As(err, &ve) {
		e.Valid, e.ValidWhat = ve.valid, ve.validWhat
	}
	return e
}

// resolvePath makes a path value absolute.
func (l *loader) resolvePath(k *Key, v any, base string) any {
	s, ok := v.(string)
	if !ok || s == "" || (k.Type != TypePath && k.Type != TypeFile) {
		return v
	}
	if l.home != "" && (s == "~" || strings.HasPrefix(s, "~/")) {
		return filepath.Join(l.home, s[1:])
	}
	if filepath.IsAbs(s) {
		return filepath.Clean(s)
	}
	return filepath.Join(base, s)
}

// check validates what only the resolved whole can tell.
func (l *loader) check(c *Config) error {
	for i := range keys {
		k := &keys[i]
		s := c.settings[k.Name]
		path, _ := s.val.(string)
		if k.Type != TypeFile || path == "" {
			continue
		}
		fi, err := os.Stat(path)
		var msg string
		switch {
		case err != nil:
			msg = fmt.Sprintf("%s: %s", path, unwrapPathError(err))
		case !fi.Mode().IsRegular():
			msg = fmt.Sprintf("%s is not a regular file", path)
		}
		if msg != "" {
			if raw, _ := s.raw.(string); s.src.file != nil && !filepath.IsAbs(raw) && !strings.HasPrefix(raw, "~") {
				msg += fmt.Sprintf(" (a relative path in %s is resolved against %s)", s.src.file.display, s.src.base)
			}
			return errFrom(s.src, k, msg, err)
		}
	}

	id, snap := c.settings["sandboxes.sandbox_id"], c.settings["sandboxes.snapshot_name"]
	if c.Sandbox.ID != "" && c.Sandbox.Snapshot != "" {
		if snap.src.layer != layerDefault && snap.src.layer >= id.src.layer {
			return errFrom(snap.src, lookup("sandboxes.snapshot_name"),
				fmt.Sprintf("snapshots only apply when creating a fresh sandbox, and sandboxes.sandbox_id (%s) attaches to an existing one: set only one of them", id.src.label), nil)
		}
		c.Sandbox.Snapshot = ""
		snap.note = "ignored: sandboxes.sandbox_id is set"
		c.settings["sandboxes.snapshot_name"] = snap
	}
	return nil
}

// assign stores a parsed value in the typed field ptr points to.
func assign(ptr, v any) {
	switch p := ptr.(type) {
	case *string:
		*p, _ = v.(string)
	case *bool:
		*p, _ = v.(bool)
	case *time.Duration:
		*p, _ = v.(time.Duration)
	case *int64:
		*p, _ = v.(int64)
	case *float64:
		*p, _ = v.(float64)
	case *[]string:
		*p, _ = v.([]string)
	}
}

// FindProject walks up from workDir looking for the project root: the first directory
// holding .talkops/config.toml (other than homeDir, whose file is the user config), or
// else containing .git (a directory, or a file in worktrees and submodules). It returns
// the root and the project config file ("" if none). With neither found up to the
// filesystem root, the root is workDir.
func FindProject(workDir, homeDir string) (root, configFile string, err error) {
	dir := filepath.Clean(workDir)
	for {
		if dir != homeDir {
			cfg := filepath.Join(dir, ".talkops", "config.toml")
			fi, err := os.Stat(cfg)
			switch {
			case err == nil && fi.IsDir():
				return "", "", &Error{File: cfg, Msg: "is a directory, want a TOML file"}
			case err == nil:
				return dir, cfg, nil
			case !errors.Is(err, fs.ErrNotExist) && !isNotDir(err):
				return "", "", &Error{File: cfg, Msg: "read config: " + unwrapPathError(err), Err: err}
			}
		}
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir, "", nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return filepath.Clean(workDir), "", nil
		}
		dir = parent
	}
}

// isNotDir reports ENOTDIR (a file named .talkops), which means "no config here".
func isNotDir(err error) bool {
	return errors.Is(err, syscall.ENOTDIR)
}

// Values lists every resolved setting with its value and source, in key-table order,
// followed by the provider tables' keys. Secret values are redacted.
func (c *Config) Values() []result.ConfigValue {
	var out []result.ConfigValue
	for i := range keys {
		k := &keys[i]
		s, ok := c.settings[k.Name]
		if !ok {
			continue
		}
		v := format(k, s.val)
		if k.Secret && v != "" {
			v = redacted
		}
		out = append(out, result.ConfigValue{Key: k.Name, Value: v, Source: s.label()})
	}
	names := make([]string, 0, len(c.Providers))
	for name := range c.Providers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		out = append(out, c.Providers[name].values()...)
	}
	for _, name := range slices.Sorted(maps.Keys(c.MCPServers)) {
		out = append(out, c.MCPServers[name].values()...)
	}
	return out
}

const redacted = "<redacted>"

func (s setting) label() string {
	if s.note != "" {
		return s.src.label + " (" + s.note + ")"
	}
	return s.src.label
}

// Source says where the setting key (a canonical name, an alias, or a provider key such
// as "sandboxes.providers.docker.image") came from; "" if it is not set or unknown.
func (c *Config) Source(key string) string {
	if k := lookup(key); k != nil {
		if s, ok := c.settings[k.Name]; ok {
			return s.label()
		}
		return ""
	}
	rest, ok := strings.CutPrefix(key, providersTable+".")
	if !ok {
		return ""
	}
	name, sub, _ := strings.Cut(rest, ".")
	pt, ok := c.Providers[name]
	if !ok {
		return ""
	}
	return pt.Source(sub)
}

// IsSet reports whether the setting key (a canonical name or an alias) came from a
// flag, the environment or a config file rather than its built-in default.
func (c *Config) IsSet(key string) bool {
	k := lookup(key)
	if k == nil {
		return false
	}
	s, ok := c.settings[k.Name]
	return ok && s.src.layer != layerDefault
}

// Print writes the `talkops config` table: key, value and source, aligned.
func Print(w io.Writer, c *Config) error {
	return printValues(w, c.Values())
}

func printValues(w io.Writer, values []result.ConfigValue) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
	for _, v := range values {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", printable(v.Key), printable(v.Value), printable(v.Source))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	return nil
}

// printable keeps one value on one table cell: empty shows as (none), and anything with
// spaces at the ends, tabs, newlines or other control characters is quoted.
func printable(s string) string {
	if s == "" {
		return "(none)"
	}
	if strings.TrimSpace(s) != s || strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// ReportDir is where a run's result.json and reports go: run.report_dir as set, or one
// directory per run under the default.
func (c *Config) ReportDir(runID string) string {
	if !c.IsSet(KeyReportDir) {
		return filepath.Join(c.Run.ReportDir, runID)
	}
	return c.Run.ReportDir
}
