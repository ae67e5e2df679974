package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/talkops/talkops/providers/cache"
)

// Type is the kind of value a Key holds; it decides how the value is parsed from a config
// file, an environment variable or a flag, and how it is shown.
type Type int

// Value types.
const (
	// TypeString is any string.
	TypeString Type = iota + 1
	// TypeBool is a TOML boolean, or one of the strings true, false, yes, no, 1, 0
	// (any case).
	TypeBool
	// TypeDuration is a Go duration string ("30m", "1h30m", "0" for none); never negative.
	TypeDuration
	// TypeSize is a byte count: a TOML integer, or a string with an optional unit
	// ("10MiB", "512KiB", "1GB", "2048"). Must be positive.
	TypeSize
	// TypeEnum is one of Key.Choices.
	TypeEnum
	// TypeProvider is a sandbox provider name from Options.Providers.
	TypeProvider
	// TypeList is a TOML array of strings; from an environment variable or a flag, a
	// comma-separated list.
	TypeList
	// TypePath is a host path. A relative path from a config file is resolved against the
	// directory holding that file's .talkops/ folder; from a flag or the environment,
	// against the working directory; a default, against the project root. "~/" is the
	// home directory.
	TypePath
	// TypeFile is a TypePath that must name an existing regular file.
	TypeFile
	// TypeInt is a whole number, zero or more.
	TypeInt
	// TypeFloat is a number, zero or more.
	TypeFloat
)

var typeNames = map[Type]string{
	TypeString:   "string",
	TypeBool:     "boolean",
	TypeDuration: "duration",
	TypeSize:     "size",
	TypeEnum:     "enum",
	TypeProvider: "provider",
	TypeList:     "list",
	TypePath:     "path",
	TypeFile:     "file",
	TypeInt:      "integer",
	TypeFloat:    "number",
}

// String names the type as help text shows it.
func (t Type) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Trust says who may set a key. The project's own .talkops/config.toml is untrusted input:
// a pull request can change it. Keys that move credentials or widen access are TrustedOnly:
// only a flag, the environment or the user's config may set them, unless a trusted layer
// sets trust_project_config. Every key must have a class; a literal that only changes the
// inside of an isolating sandbox, or that only tightens, is Safe.
type Trust int

// Trust classes. The zero value is no class, which the loader treats as TrustedOnly.
const (
	// Safe keys may be set by the project file.
	Safe Trust = iota + 1
	// TrustedOnly keys: the project file setting one is a usage error.
	TrustedOnly
)

// String names the class as help text shows it.
func (t Trust) String() string {
	switch t {
	case Safe:
		return "safe"
	case TrustedOnly:
		return "trusted-only"
	}
	return "Trust(" + strconv.Itoa(int(t)) + ")"
}

// Key describes one setting: its name in config.toml, its type, the environment variables
// that set it, its default and its help. Adding a setting is one entry in the table
// returned by Keys (plus the typed field it lands in).
type Key struct {
	// Name is the dotted TOML path: "sandboxes.default" is key default in [sandboxes].
	Name string
	// Aliases are other accepted spellings of the same key. Setting a key and its alias
	// in one file is an error.
	Aliases []string
	Type    Type
	// Env lists the environment variables that set the key, highest precedence first.
	Env []string
	// Default is the value when nothing else sets it, written as a user would write it
	// in an environment variable; "" means unset.
	Default string
	// Help is one line for --help and the docs.
	Help string
	// Choices are the valid values of a TypeEnum.
	Choices []string
	// Secret keys are shown redacted by Values and Print.
	Secret bool
	// Trust is whether the project's own config file may set the key (required: Safe or
	// TrustedOnly). Path keys set by the project file must also lie inside the project.
	Trust Trust
	// Accumulate joins a list's values from every layer instead of letting the highest
	// win: for keys that only add (names to redact), a lower layer must not be dropped.
	Accumulate bool
	// ProjectCheck, on a Safe key, refuses values only a trusted layer may set (a host
	// path among preset names, say) when the project file sets them.
	ProjectCheck func(v any) error
	// Check is an extra validation of the parsed value (string, bool, time.Duration,
	// int64 or []string), or nil.
	Check func(v any) error

	// field returns a pointer to the typed Config field the value is stored in.
	field func(c *Config) any
}

// keys is the table of every setting. Keep it in the order `talkops config` prints.
var keys = []Key{
	{
		Name:    "sandboxes.default",
		Trust:   TrustedOnly,
		Aliases: []string{"sandboxes.provider"},
		Type:    TypeProvider,
		Env:     []string{"TALKOPS_SANDBOX_PROVIDER", "SANDBOX_PROVIDER"},
		Default: "local",
		Help:    "sandbox provider the agent's tools run in",
		field:   func(c *Config) any { return &c.Sandbox.Provider },
	},
	{
		Name:  KeySandboxID,
		Trust: TrustedOnly,
		Type:  TypeString,
		Env:   []string{"TALKOPS_SANDBOX_ID", "SANDBOX_ID"},
		Help:  "attach to this running sandbox instead of creating one; it is never deleted",
		field: func(c *Config) any { return &c.Sandbox.ID },
	},
	{
		Name:    KeySnapshotName,
		Trust:   Safe,
		Aliases: []string{"sandboxes.snapshot"},
		Type:    TypeString,
		Env:     []string{"TALKOPS_SANDBOX_SNAPSHOT", "SANDBOX_SNAPSHOT"},
		Default: "talkops-aws-agent",
		Help:    "snapshot or blueprint a new sandbox starts from, on providers that support snapshots",
		field:   func(c *Config) any { return &c.Sandbox.Snapshot },
	},
	{
		Name:  "sandboxes.setup_script_path",
		Trust: Safe,
		Type:  TypeFile,
		Env:   []string{"TALKOPS_SANDBOX_SETUP_SCRIPT", "SANDBOX_SETUP_SCRIPT"},
		Help:  "script run inside the sandbox after it starts and the workspace is synced",
		field: func(c *Config) any { return &c.Sandbox.SetupScript },
	},
	{
		Name:    "sandboxes.sync_workspace",
		Trust:   Safe,
		Type:    TypeBool,
		Env:     []string{"TALKOPS_SANDBOX_SYNC_WORKSPACE", "SANDBOX_SYNC_WORKSPACE"},
		Default: "true",
		Help:    "upload the project into the sandbox before the setup script runs",
		field:   func(c *Config) any { return &c.Sandbox.SyncWorkspace },
	},
	{
		Name:    KeyImage,
		Trust:   Safe,
		Type:    TypeString,
		Env:     []string{"TALKOPS_SANDBOX_IMAGE", "SANDBOX_IMAGE"},
		Default: "python:3.12-slim",
		Help:    "base image for a new sandbox, or for a snapshot the provider builds",
		field:   func(c *Config) any { return &c.Sandbox.Image },
	},
	{
		Name:  "sandboxes.sync.include",
		Trust: TrustedOnly,
		Type:  TypeList,
		Help:  "patterns uploaded even though they would be withheld as secrets or ignored",
		field: func(c *Config) any { return &c.Sandbox.Sync.Include },
	},
	{
		Name:  "sandboxes.sync.exclude",
		Trust: Safe,
		Type:  TypeList,
		Help:  "extra patterns never uploaded",
		field: func(c *Config) any { return &c.Sandbox.Sync.Exclude },
	},
	{
		Name:    "sandboxes.sync.max_file_size",
		Trust:   Safe,
		Type:    TypeSize,
		Default: "10MiB",
		Help:    "files larger than this are not uploaded",
		field:   func(c *Config) any { return &c.Sandbox.Sync.MaxFileSize },
	},
	{
		// Trust: safe. A literal value only changes the inside of the sandbox; on
		// local, which runs the repository's own checks on the host anyway, it is no
		// wider either.
		Name:  "sandboxes.env",
		Trust: Safe,
		Type:  TypeList,
		Help:  "NAME=value pairs set in every sandbox command's environment, e.g. PATH=/usr/local/go/bin:/usr/bin:/bin",
		Check: checkEnvPairs,
		field: func(c *Config) any { return &c.Sandbox.Env },
	},
	{
		// Trust: trusted-only. It brings a host variable's value into the sandbox, so a
		// repository's own config must not set it.
		Name:  "sandboxes.pass_env",
		Trust: TrustedOnly,
		Type:  TypeList,
		Env:   []string{"TALKOPS_SANDBOX_PASS_ENV"},
		Help:  "names of host environment variables passed into every sandbox command; their values are masked in every output",
		Check: checkEnvNames,
		field: func(c *Config) any { return &c.Sandbox.PassEnv },
	},
	{
		// Preset names are safe anywhere; an absolute host directory widens what the
		// sandbox reads, which makes this key trusted-only for host paths.
		Name:  KeyCaches,
		Trust: Safe,
		ProjectCheck: func(v any) error {
			for _, e := range v.([]string) {
				if cache.IsHostPath(e) {
					return fmt.Errorf("%s: a host directory shared with the sandbox is trusted-only (presets such as go or npm are fine)", e)
				}
			}
			return nil
		},
		Type:  TypeList,
		Env:   []string{"TALKOPS_SANDBOX_CACHES"},
		Help:  "caches shared copy-on-write with isolating sandboxes: go, npm, pip, cargo, maven, gradle, terraform, or absolute host directories",
		Check: checkCaches,
		field: func(c *Config) any { return &c.Sandbox.Caches },
	},
	{
		Name:    "run.timeout",
		Trust:   Safe,
		Type:    TypeDuration,
		Env:     []string{"TALKOPS_TIMEOUT"},
		Default: "30m",
		Help:    "wall-clock budget for the whole run (0 = none); running out exits 124",
		field:   func(c *Config) any { return &c.Run.Timeout },
	},
	{
		Name:    KeyReportDir,
		Trust:   Safe,
		Type:    TypePath,
		Env:     []string{"TALKOPS_REPORT_DIR"},
		Default: ".talkops/runs",
		Help:    "directory result.json and the reports are written to; the default gets one subdirectory per run id",
		field:   func(c *Config) any { return &c.Run.ReportDir },
	},
	{
		Name:    "run.output_format",
		Trust:   Safe,
		Type:    TypeEnum,
		Env:     []string{"TALKOPS_OUTPUT_FORMAT"},
		Default: "text",
		Choices: []string{"text", "json", "stream-json"},
		Help:    "what stdout carries: the answer as text, one JSON document, or JSON lines of events",
		field:   func(c *Config) any { return &c.Run.OutputFormat },
	},
	{
		Name:    "run.log_level",
		Trust:   Safe,
		Type:    TypeEnum,
		Env:     []string{"TALKOPS_LOG_LEVEL"},
		Default: "info",
		Choices: []string{"debug", "info", "warn", "error"},
		Help:    "least severe log level written to stderr",
		field:   func(c *Config) any { return &c.Run.LogLevel },
	},
	{
		Name:  "model.name",
		Trust: Safe,
		Type:  TypeString,
		Env:   []string{"TALKOPS_MODEL"},
		Help:  "model as PROVIDER:NAME (anthropic:claude-sonnet-4-5, openai:gpt-4.1); unset follows the API key that is present",
		field: func(c *Config) any { return &c.Model.Name },
	},
	{
		Name:  "model.base_url",
		Trust: TrustedOnly,
		Type:  TypeString,
		Env:   []string{"TALKOPS_BASE_URL"},
		Help:  "API base URL, for OpenAI-compatible servers (Ollama, vLLM, LiteLLM, OpenRouter, Azure OpenAI)",
		field: func(c *Config) any { return &c.Model.BaseURL },
	},
	{
		Name:    "agent.max_turns",
		Trust:   Safe,
		Type:    TypeInt,
		Env:     []string{"TALKOPS_MAX_TURNS"},
		Default: "50",
		Help:    "model turns before the agent must answer (parallel tool calls count once); running out exits 124",
		Check:   positive("agent.max_turns"),
		field:   func(c *Config) any { return &c.Agent.MaxTurns },
	},
	{
		Name:    KeyMaxCostUSD,
		Trust:   TrustedOnly,
		Type:    TypeFloat,
		Env:     []string{"TALKOPS_MAX_COST_USD"},
		Default: "5",
		Help:    "model spend in US dollars before the agent must answer (0 = no limit); running out exits 124",
		field:   func(c *Config) any { return &c.Agent.MaxCostUSD },
	},
	{
		Name:    "agent.stall_timeout",
		Trust:   Safe,
		Type:    TypeDuration,
		Env:     []string{"TALKOPS_STALL_TIMEOUT"},
		Default: "10m",
		Help:    "end the run (exit 124) when neither the model nor a tool makes progress for this long",
		field:   func(c *Config) any { return &c.Agent.StallTimeout },
	},
	{
		Name:    "agent.tool_timeout",
		Trust:   Safe,
		Type:    TypeDuration,
		Default: "10m",
		Help:    "time limit of one shell command or MCP tool call the agent runs",
		field:   func(c *Config) any { return &c.Agent.ToolTimeout },
	},
	{
		Name:    "approval.mode",
		Trust:   TrustedOnly,
		Type:    TypeEnum,
		Env:     []string{"TALKOPS_APPROVAL_MODE"},
		Default: "default",
		Choices: []string{"default", "smart", "yes"},
		Help:    "how tool calls are approved headless: default denies mutating tools, smart applies the allow/deny policy, yes approves all",
		field:   func(c *Config) any { return &c.Approval.Mode },
	},
	{
		Name:  "approval.allow",
		Trust: TrustedOnly,
		Type:  TypeList,
		Help:  "shell command patterns --smart may run (empty: any command not denied)",
		field: func(c *Config) any { return &c.Approval.Allow },
	},
	{
		Name:  "approval.deny",
		Trust: Safe,
		Type:  TypeList,
		Help:  "shell command patterns never run, in every approval mode",
		field: func(c *Config) any { return &c.Approval.Deny },
	},
	{
		Name:  "rubric.model",
		Trust: Safe,
		Type:  TypeString,
		Env:   []string{"TALKOPS_RUBRIC_MODEL"},
		Help:  "judge model as PROVIDER:NAME; unset uses the agent's model",
		field: func(c *Config) any { return &c.Rubric.Model },
	},
	{
		Name:    "rubric.max_iterations",
		Trust:   Safe,
		Type:    TypeInt,
		Env:     []string{"TALKOPS_RUBRIC_MAX_ITERATIONS"},
		Default: "3",
		Help:    "agent passes the revision loop allows (1 = no revision)",
		Check:   positive("rubric.max_iterations"),
		field:   func(c *Config) any { return &c.Rubric.MaxIterations },
	},
	{
		Name:    KeyRubricVotes,
		Trust:   Safe,
		Type:    TypeInt,
		Env:     []string{"TALKOPS_RUBRIC_VOTES"},
		Default: "1",
		Help:    "judge calls per criterion, an odd number; the majority decides",
		Check: func(v any) error {
			if n, _ := v.(int64); n < 1 || n%2 == 0 {
				return fmt.Errorf("rubric.votes must be an odd number of 1 or more, got %d", n)
			}
			return nil
		},
		field: func(c *Config) any { return &c.Rubric.Votes },
	},
	{
		Name:    "rubric.verify",
		Type:    TypeEnum,
		Env:     []string{"TALKOPS_RUBRIC_VERIFY"},
		Default: "clean",
		Choices: []string{"clean", "in-place"},
		// in-place makes the verdict trust the agent's own sandbox: a weaker gate.
		Trust: TrustedOnly,
		Help:  "where checks run after an agent: a fresh sandbox with its change set (clean) or its own sandbox (in-place)",
		field: func(c *Config) any { return &c.Rubric.Verify },
	},
	{
		Name:       "redact.env",
		Type:       TypeList,
		Env:        []string{"TALKOPS_REDACT"},
		Trust:      Safe,
		Accumulate: true,
		Help:       "environment variables whose values are masked in everything talkops prints or publishes; every layer adds to the list",
		field:      func(c *Config) any { return &c.Redact.Env },
	},
	{
		Name:    TrustProjectKey,
		Type:    TypeBool,
		Env:     []string{"TALKOPS_TRUST_PROJECT_CONFIG"},
		Default: "false",
		Trust:   TrustedOnly,
		Help:    "let the project's .talkops/config.toml set trusted-only keys and paths outside the project; only for repositories whose every change you trust",
		field:   func(c *Config) any { return &c.TrustProjectConfig },
	},
}

// Keys the program asks about by name (whether they were set, and where).
const (
	KeySandboxID    = "sandboxes.sandbox_id"
	KeySnapshotName = "sandboxes.snapshot_name"
	KeyImage        = "sandboxes.image"
	KeyCaches       = "sandboxes.caches"
	KeyReportDir    = "run.report_dir"
	KeyMaxCostUSD   = "agent.max_cost_usd"
	KeyRubricVotes  = "rubric.votes"
)

// TrustProjectKey is the key (and, with dashes, the flag) a trusted layer sets to let the
// project's own config set trusted-only keys.
const TrustProjectKey = "trust_project_config"

// HelpText is Help followed by the default, the choices, the environment variables and
// the config.toml key, for a flag's --help line:
//
//	wall-clock budget ... (default "30m"; env TALKOPS_TIMEOUT; config [run] timeout)
func (k Key) HelpText() string {
	var extra []string
	if k.Default != "" {
		extra = append(extra, fmt.Sprintf("default %q", k.Default))
	}
	if len(k.Choices) > 0 {
		extra = append(extra, "one of "+strings.Join(k.Choices, ", "))
	}
	if len(k.Env) > 0 {
		extra = append(extra, "env "+strings.Join(k.Env, ", "))
	}
	if i := strings.LastIndexByte(k.Name, '.'); i >= 0 {
		extra = append(extra, "config ["+k.Name[:i]+"] "+k.Name[i+1:])
	} else {
		extra = append(extra, "config "+k.Name)
	}
	if k.Trust != Safe {
		extra = append(extra, "trusted-only")
	}
	return k.Help + " (" + strings.Join(extra, "; ") + ")"
}

// checkEnvPairs validates [sandboxes] env: each entry NAME=value with a valid name.
func checkEnvPairs(v any) error {
	for _, kv := range v.([]string) {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("sandboxes.env entry %q: want NAME=value", kv)
		}
		if err := checkEnvName("sandboxes.env", name); err != nil {
			return err
		}
		if strings.ContainsRune(kv, 0) {
			return fmt.Errorf("sandboxes.env entry %s: value contains NUL", name)
		}
	}
	return nil
}

// checkEnvNames validates [sandboxes] pass_env: each entry a variable name.
func checkEnvNames(v any) error {
	for _, name := range v.([]string) {
		if err := checkEnvName("sandboxes.pass_env", name); err != nil {
			return err
		}
	}
	return nil
}

func checkEnvName(key, name string) error {
	ok := name != ""
	for i, r := range name {
		if !(r == '_' || 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || i > 0 && '0' <= r && r <= '9') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("%s: %q is not a variable name; want letters, digits and _, not starting with a digit", key, name)
	}
	return nil
}

func positive(name string) func(any) error {
	return func(v any) error {
		if n, _ := v.(int64); n < 1 {
			return fmt.Errorf("%s must be 1 or more, got %d", name, n)
		}
		return nil
	}
}

// Keys returns the table of settings, in display order, for help text and docs.
func Keys() []Key {
	out := make([]Key, len(keys))
	for i, k := range keys {
		k.Aliases = slices.Clone(k.Aliases)
		k.Env = slices.Clone(k.Env)
		k.Choices = slices.Clone(k.Choices)
		out[i] = k
	}
	return out
}

// Lookup returns the Key named name or one of its aliases.
func Lookup(name string) (Key, bool) {
	if k := lookup(name); k != nil {
		return *k, true
	}
	return Key{}, false
}

func lookup(name string) *Key {
	for i := range keys {
		if keys[i].Name == name || slices.Contains(keys[i].Aliases, name) {
			return &keys[i]
		}
	}
	return nil
}

// boolWords are the accepted spellings of a boolean given as a string.
var boolWords = []string{"true", "false", "yes", "no", "1", "0"}

// parseText parses a value given as text: an environment variable, a flag or a default.
func parseText(k *Key, s string, providers []string) (any, error) {
	switch k.Type {
	case TypeString, TypePath, TypeFile:
		return s, nil
	case TypeBool:
		return parseBool(s)
	case TypeDuration:
		return parseDuration(s)
	case TypeSize:
		return parseSize(s)
	case TypeEnum:
		return parseChoice(s, k.Choices, "values")
	case TypeProvider:
		return parseProvider(s, providers)
	case TypeInt:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < 0 {
			return nil, badValue(nil, "", "want a whole number of 0 or more, got %q", s)
		}
		return n, nil
	case TypeFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, badValue(nil, "", "want a number of 0 or more, got %q", s)
		}
		return f, nil
	case TypeList:
		var out []string
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("key %s has unknown type %v", k.Name, k.Type)
}

// parseTOML parses a value as go-toml decoded it from a config file.
func parseTOML(k *Key, v any, providers []string) (any, error) {
	switch k.Type {
	case TypeBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		if s, ok := v.(string); ok {
			return parseBool(s)
		}
		return nil, badValue(boolWords, "values", "want a boolean, got %s", describe(v))
	case TypeInt:
		n, ok := v.(int64)
		if !ok || n < 0 {
			return nil, badValue(nil, "", "want a whole number of 0 or more, got %s", describe(v))
		}
		return n, nil
	case TypeFloat:
		switch n := v.(type) {
		case int64:
			if n >= 0 {
				return float64(n), nil
			}
		case float64:
			if n >= 0 && !math.IsNaN(n) && !math.IsInf(n, 0) {
				return n, nil
			}
		}
		return nil, badValue(nil, "", "want a number of 0 or more, got %s", describe(v))
	case TypeSize:
		if n, ok := v.(int64); ok {
			if n <= 0 {
				return nil, badValue(nil, "", "size must be positive, got %d", n)
			}
			return n, nil
		}
		if s, ok := v.(string); ok {
			return parseSize(s)
		}
		return nil, badValue(nil, "", "want a size in bytes or a string like \"10MiB\", got %s", describe(v))
	case TypeList:
		arr, ok := v.([]any)
		if !ok {
			return nil, badValue(nil, "", "want an array of strings, got %s", describe(v))
		}
		out := make([]string, 0, len(arr))
		for i, e := range arr {
			s, ok := e.(string)
			if !ok {
				return nil, badValue(nil, "", "want an array of strings, element %d is %s", i, describe(e))
			}
			out = append(out, s)
		}
		return out, nil
	case TypeDuration:
		s, ok := v.(string)
		if !ok {
			return nil, badValue(nil, "", "want a duration string like \"30m\", got %s", describe(v))
		}
		return parseDuration(s)
	case TypeEnum:
		s, ok := v.(string)
		if !ok {
			return nil, badValue(k.Choices, "values", "want a string, got %s", describe(v))
		}
		return parseChoice(s, k.Choices, "values")
	case TypeProvider:
		s, ok := v.(string)
		if !ok {
			return nil, badValue(providers, "providers", "want a provider name, got %s", describe(v))
		}
		return parseProvider(s, providers)
	case TypeString, TypePath, TypeFile:
		s, ok := v.(string)
		if !ok {
			return nil, badValue(nil, "", "want a string, got %s", describe(v))
		}
		return s, nil
	}
	return nil, fmt.Errorf("key %s has unknown type %v", k.Name, k.Type)
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "1":
		return true, nil
	case "false", "no", "0":
		return false, nil
	}
	return false, badValue(boolWords, "values", "invalid boolean %q", s)
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, badValue(nil, "", "invalid duration %q: want a number with a unit, like \"90s\", \"30m\" or \"1h30m\"", s)
	}
	if d < 0 {
		return 0, badValue(nil, "", "duration %q is negative", s)
	}
	return d, nil
}

var sizeUnits = []struct {
	name string
	mult int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

func sizeUnitNames() []string {
	out := make([]string, len(sizeUnits))
	for i, u := range sizeUnits {
		out[i] = u.name
	}
	return out
}

// parseSize reads "10MiB", "1.5GB", "512 KiB" or "2048" (bytes).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if len(t) > len(u.name) && strings.EqualFold(t[len(t)-len(u.name):], u.name) {
			mult = u.mult
			t = strings.TrimSpace(t[:len(t)-len(u.name)])
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, badValue(sizeUnitNames(), "units", "invalid size %q: want a byte count, optionally with a unit, like \"10MiB\"", s)
	}
	n := f * float64(mult)
	if n < 1 {
		return 0, badValue(nil, "", "size %q must be at least one byte", s)
	}
	if n >= math.MaxInt64 {
		return 0, badValue(nil, "", "size %q is too large", s)
	}
	return int64(n), nil
}

func parseChoice(s string, choices []string, what string) (string, error) {
	if slices.Contains(choices, s) {
		return s, nil
	}
	return "", badValue(choices, what, "invalid value %q", s)
}

// parseProvider accepts any name when providers is nil (the caller did not say).
func parseProvider(s string, providers []string) (string, error) {
	if s == "" {
		return "", badValue(providers, "providers", "empty provider name")
	}
	if providers == nil || slices.Contains(providers, s) {
		return s, nil
	}
	if near := Suggest(s, providers); near != "" {
		return "", badValue(providers, "providers", "unknown provider %q, did you mean %s?", s, near)
	}
	return "", badValue(providers, "providers", "unknown provider %q", s)
}

// describe names a decoded TOML value's type and shows it, for messages.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("string %q", v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return fmt.Sprintf("float %v", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date-time"
	case toml.LocalDateTime:
		return "a local date-time"
	case toml.LocalDate:
		return "a date"
	case toml.LocalTime:
		return "a time"
	}
	return fmt.Sprintf("a %T", v)
}

// format shows a parsed value the way a user would write it.
func format(k *Key, v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case time.Duration:
		return formatDuration(v)
	case int64:
		if k.Type == TypeSize {
			return formatSize(v)
		}
		return strconv.FormatInt(v, 10)
	case []string:
		return strings.Join(v, ",")
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// formatDuration drops the zero units time.Duration.String keeps: "30m", not "30m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// checkCaches validates [sandboxes] caches entries against the presets.
func checkCaches(v any) error {
	for _, e := range v.([]string) {
		if err := cache.Check(e); err != nil {
			return err
		}
	}
	return nil
}

// Sources says where the key's value may come from, for help text: its default, its
// environment variables, where it goes in a config file, and whether the project's file
// may set it. The flags' help renders it, so help cannot drift from the table.
func (k Key) Sources() string {
	var parts []string
	if k.Default != "" {
		parts = append(parts, "default "+k.Default)
	}
	if len(k.Env) > 0 {
		parts = append(parts, "env "+strings.Join(k.Env, ", "))
	}
	if i := strings.LastIndexByte(k.Name, '.'); i >= 0 {
		parts = append(parts, fmt.Sprintf("config [%s] %s", k.Name[:i], k.Name[i+1:]))
	} else {
		parts = append(parts, "config "+k.Name)
	}
	if k.Trust != Safe {
		parts = append(parts, "trusted-only: not from the project's config")
	}
	return "(" + strings.Join(parts, "; ") + ")"
}
