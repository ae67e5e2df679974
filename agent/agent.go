// Package agent is the talkops agent: a model in a loop with tools that run inside the
// run's sandbox, under an approval policy and budgets, with every step recorded.
//
// New builds an Agent for one sandbox; Run sends the prompt and drives the conversation
// until the model gives a final answer or a budget runs out; Revise continues the same
// conversation (same sandbox, same budgets) with the rubric's list of unmet criteria.
//
// # Budgets
//
// A turn is one reply of the model, however many tools it calls (parallel tool calls in one
// reply are one turn). MaxTurns bounds the turns that may call tools; MaxCostUSD bounds
// the money spent on the model, checked before every call against the spend so far plus an
// estimate of the call; the context's deadline, minus FinalReserve, bounds the time; and the
// stall watchdog ends the run when neither the model nor a tool has shown progress for
// StallTimeout (progress: bytes of a streamed model reply, or output of a command). When any of them runs out the model gets one more call, without tools, to
// give its best final answer (its max_tokens cut to what the cost budget still pays for),
// and the Outcome is Partial with StopReason max_turns, max_cost, timeout or stalled. The
// runner maps a partial outcome to exit code 124. Record.Turns counts the turns that could
// call tools, so it never exceeds MaxTurns; the final-answer call is not a turn (it shows
// in the transcript as a model.request with "final": true, and its tokens are counted).
//
// # Approvals and denials
//
// Every tool call passes the Approval policy first (see Mode). A denied call is not run;
// the model gets the reason as the tool result, and the denial is recorded in
// result.Agent.Denials, as a tool.denied event and in the transcript. The rule that keeps a
// run from ending silently green because a tool needed approval: in ModeDefault (neither
// -y nor --smart) any denial makes the outcome Partial with StopReason "approval_required"
// (unless a budget reason came first), so the run exits 124 with the denials listed. In
// ModeSmart and ModeYes the user chose the policy, so a denial is the policy working: the
// outcome is unchanged, and the denials are still listed and warned about.
//
// # Transcript and secrets
//
// Every model request (the messages added since the previous one) and response, tool call,
// tool result, denial, finding and warning is an events.Event sent to Options.Sink and
// appended to ReportDir/transcript.jsonl. Secrets (Options.Secrets, Options.Redactor and the
// model's own API key) are replaced with *** in events, the transcript, saved tool
// outputs, the Outcome, and in tool output before the model sees it. A tool output longer
// than MaxToolOutput reaches the model as its head and tail with a marker; the whole
// output is saved as ReportDir/tool-outputs/<n>.txt.
package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/tools"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/result"
)

// Defaults for zero Options fields.
const (
	DefaultMaxTurns      = 50
	DefaultStallTimeout  = 10 * time.Minute
	DefaultMaxToolOutput = 30000
	// DefaultFinalReserve is the upper bound of the time kept before the context's deadline
	// for the final answer (see Options.FinalReserve).
	DefaultFinalReserve = time.Minute
)

// Stop reasons (result.Agent.StopReason).
const (
	StopDone             = "done"              // the model gave its final answer
	StopMaxTurns         = "max_turns"         // partial
	StopMaxCost          = "max_cost"          // partial
	StopTimeout          = "timeout"           // partial
	StopStalled          = "stalled"           // partial
	StopApprovalRequired = "approval_required" // partial: a tool call needed approval (ModeDefault)
	StopInterrupted      = "interrupted"       // partial: the context was cancelled (signal)
	StopRefused          = "refused"           // the model declined the task
	StopEmpty            = "empty"             // the model ended without an answer, twice
	StopError            = "error"             // Run returned an error (model or sandbox)
)

// ErrConfig is wrapped by New's errors: the options are invalid (a usage error).
var ErrConfig = errors.New("invalid agent options")

// Options configure an Agent. Model and Sandbox are required.
type Options struct {
	Model model.Model
	// ModelName is recorded in result.json ("anthropic:claude-sonnet-4-5"); "" uses the
	// model's String() when it has one.
	ModelName string
	Sandbox   providers.Sandbox
	Approval  Approval
	// MaxTurns bounds the turns that may call tools; 0 means DefaultMaxTurns.
	MaxTurns int
	// MaxCostUSD bounds the model spend; 0 means no bound. It needs a priced model.
	MaxCostUSD float64
	// StallTimeout ends the run when nothing progressed for this long; 0 means
	// DefaultStallTimeout, negative disables the watchdog. Keep it above ToolTimeout if
	// your commands can be silent for that long.
	StallTimeout time.Duration
	// ToolTimeout bounds one execute call; 0 means tools.DefaultToolTimeout.
	ToolTimeout time.Duration
	// FinalReserve is the time kept before the context's deadline for the final answer
	// after a timeout; 0 means a tenth of the time left at Run, at least 5 s and at most
	// DefaultFinalReserve.
	FinalReserve time.Duration
	// MaxToolOutput is how many bytes of one tool result the model sees; 0 means
	// DefaultMaxToolOutput.
	MaxToolOutput int
	// MaxTokens caps each reply; 0 uses the model's default.
	MaxTokens int
	// Instructions are appended to the system prompt (project-specific guidance).
	Instructions string
	// ReportDir receives transcript.jsonl and tool-outputs/; "" keeps no files.
	ReportDir string
	Sink      events.Sink
	// Secrets are values to redact everywhere; Redactor, if set, is applied as well.
	Secrets  []string
	Redactor Redactor
	// Shell overrides the sandbox shell (tools.Env.Shell); ExecEnv is added to every
	// execute command's environment; FetchClient replaces web_fetch's HTTP client.
	Shell       string
	ExecEnv     map[string]string
	FetchClient *http.Client
	// ExtraTools are offered after the built-in tools: the tools of the run's MCP servers,
	// under the same approval, output and evidence rules.
	ExtraTools []tools.Tool
}

// Outcome is what a Run or Revise produced. Record, Findings and Commands are cumulative
// over Run and every Revise.
type Outcome struct {
	Final      string
	Partial    bool
	StopReason string
	Record     result.Agent
	Findings   []result.Finding
	// Commands are the execute calls of every pass, oldest first: the real output,
	// redacted, each stream cut to its first and last 32 KiB (Truncated); the whole of it
	// is in OutputFile when that is set.
	Commands []result.Command
}

// Agent is one conversation in one sandbox. Run and Revise must not be called concurrently.
type Agent struct {
	opts   Options
	policy *compiled
	tools  []tools.Tool
	byName map[string]tools.Tool
	env    *tools.Env
	redact Redactor
	rec    *recorder
	system string
	price  model.Price
	priced bool

	toolDefs []model.Tool
	wd       atomic.Pointer[watchdog]

	mu      sync.Mutex // held by Run and Revise
	smu     sync.Mutex // guards what parallel tool calls update (marked below)
	started bool
	// conversation
	messages    []model.Message
	sent        int // messages already shown in a model.request event
	lastCallLen int // messages when the model was last called
	// accounting
	turns      int
	usage      model.Usage
	lastUsage  model.Usage
	maxOutput  int64
	toolCalls  int              // smu
	denials    []result.Denial  // smu
	findings   []result.Finding // smu
	seenFP     map[string]bool  // smu
	commands   []result.Command // smu
	pass       int              // the current pass: 1 in Run, +1 each Revise
	infraErrs  int              // smu
	final      string
	stop       string
	partial    bool
	exhausted  string // the budget that ran out; no more acting turns
	reserve    time.Duration
	lastAnswer string
}

// New checks the options and builds an Agent. Errors wrap ErrConfig.
func New(opts Options) (*Agent, error) {
	policy, err := opts.validate()
	if err != nil {
		return nil, err
	}
	if opts.Sandbox == nil {
		return nil, fmt.Errorf("%w: no sandbox", ErrConfig)
	}
	if opts.MaxTurns == 0 {
		opts.MaxTurns = DefaultMaxTurns
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.MaxToolOutput == 0 {
		opts.MaxToolOutput = DefaultMaxToolOutput
	}
	opts.ModelName = opts.modelName()
	if policy.WorkDir == "" {
		policy.WorkDir = opts.Sandbox.WorkDir() // where the execute tool runs commands
	}
	a := &Agent{opts: opts, policy: policy, seenFP: map[string]bool{}}
	if p, ok := opts.Model.(model.Pricer); ok {
		a.price, a.priced = p.Price()
	}
	secrets := append([]string(nil), opts.Secrets...)
	if h, ok := opts.Model.(model.SecretHolder); ok {
		secrets = append(secrets, h.Secrets()...)
	}
	a.redact = chain{hygiene.NewRedactor(secrets...), opts.Redactor}
	a.rec = newRecorder(opts.Sink, a.redact, opts.ReportDir)
	a.env = &tools.Env{
		Sandbox:     opts.Sandbox,
		Shell:       opts.Shell,
		ToolTimeout: opts.ToolTimeout,
		HTTPClient:  opts.FetchClient,
		ExecEnv:     opts.ExecEnv,
		MaxOutput:   opts.MaxToolOutput,
		Withheld:    policy.withholds,
	}
	a.tools = append(tools.All(a.env), opts.ExtraTools...)
	a.byName = map[string]tools.Tool{}
	for _, t := range a.tools {
		name := t.Def().Name
		if _, dup := a.byName[name]; dup {
			return nil, fmt.Errorf("%w: two tools are named %s", ErrConfig, name)
		}
		a.byName[name] = t
	}
	a.system = systemPrompt(opts.Sandbox.WorkDir(), opts)
	return a, nil
}

// Validate checks what can be checked before a sandbox exists: the model, the budgets,
// the approval patterns and whether a cost cap can be enforced. New checks the same.
func (opts Options) Validate() error {
	_, err := opts.validate()
	return err
}

func (opts Options) validate() (*compiled, error) {
	switch {
	case opts.Model == nil:
		return nil, fmt.Errorf("%w: no model", ErrConfig)
	case opts.MaxTurns < 0:
		return nil, fmt.Errorf("%w: max turns %d must be positive", ErrConfig, opts.MaxTurns)
	case opts.MaxCostUSD < 0 || math.IsNaN(opts.MaxCostUSD) || math.IsInf(opts.MaxCostUSD, 0):
		return nil, fmt.Errorf("%w: max cost %v must be a positive amount of US dollars", ErrConfig, opts.MaxCostUSD)
	case opts.ToolTimeout < 0 || opts.FinalReserve < 0 || opts.MaxToolOutput < 0 || opts.MaxTokens < 0:
		return nil, fmt.Errorf("%w: tool timeout, final reserve, max tool output and max tokens must not be negative", ErrConfig)
	}
	policy, err := opts.Approval.compile()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if opts.MaxCostUSD > 0 {
		known := false
		if p, ok := opts.Model.(model.Pricer); ok {
			_, known = p.Price()
		}
		if !known {
			return nil, fmt.Errorf("%w: a cost cap of $%.2f needs the price of %s, which is not known; add its price, or set agent.max_cost_usd = 0 to run without a cost cap",
				ErrConfig, opts.MaxCostUSD, nameOr(opts.modelName(), "the model"))
		}
	}
	return policy, nil
}

// modelName is ModelName, or what the model calls itself when that is unset.
func (opts Options) modelName() string {
	if opts.ModelName != "" {
		return opts.ModelName
	}
	if s, ok := opts.Model.(fmt.Stringer); ok {
		return s.String()
	}
	return ""
}

func nameOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Run sends prompt and works until the model's final answer or a budget runs out. The
// error is for broken infrastructure only (the model API refused the key, the sandbox
// stopped working) or a cancelled context (StopInterrupted); the Outcome is returned in
// every case, so what happened so far is never lost.
func (a *Agent) Run(ctx context.Context, prompt string) (*Outcome, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return a.outcome(), errors.New("agent: Run called twice; use Revise to continue")
	}
	if strings.TrimSpace(prompt) == "" {
		return a.outcome(), fmt.Errorf("%w: empty prompt", ErrConfig)
	}
	a.started = true
	a.reserve = a.opts.FinalReserve
	if a.reserve == 0 {
		a.reserve = DefaultFinalReserve
		if dl, ok := ctx.Deadline(); ok {
			a.reserve = min(max(time.Until(dl)/10, 5*time.Second), DefaultFinalReserve)
		}
	}
	if !a.priced {
		a.rec.warn("cost_unknown", "no price is known for %s; its cost is reported as $0", nameOr(a.opts.ModelName, "the model"))
	}
	a.messages = append(a.messages, model.Message{Role: model.RoleUser, Text: prompt})
	a.pass = 1
	return a.drive(ctx)
}

// Revise continues the conversation with message (the rubric's unmet criteria), in the
// same sandbox and under the same budgets. If a budget already ran out it returns the
// previous outcome without calling the model.
func (a *Agent) Revise(ctx context.Context, message string) (*Outcome, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started {
		return a.outcome(), errors.New("agent: Revise called before Run")
	}
	if strings.TrimSpace(message) == "" {
		return a.outcome(), fmt.Errorf("%w: empty revision message", ErrConfig)
	}
	if a.exhausted != "" {
		a.rec.warn("budget", "revision skipped: the %s budget already ran out", a.exhausted)
		return a.outcome(), nil
	}
	if a.stop == StopInterrupted || a.stop == StopError {
		return a.outcome(), fmt.Errorf("agent: cannot revise after the run ended with %s", a.stop)
	}
	a.final, a.stop = "", ""
	a.messages = append(a.messages, model.Message{Role: model.RoleUser, Text: message})
	a.pass++
	return a.drive(ctx)
}

// outcome snapshots the state. Called with mu held.
func (a *Agent) outcome() *Outcome {
	u := a.usage
	rec := result.Agent{
		Model:       a.opts.ModelName,
		Turns:       a.turns,
		FinalAnswer: a.final,
		StopReason:  a.stop,
		Usage: result.Usage{
			InputTokens:       u.TotalInput(),
			OutputTokens:      u.OutputTokens,
			CachedInputTokens: u.CacheReadTokens,
			CostUSD:           u.CostUSD,
		},
		Denials:   append([]result.Denial(nil), a.denials...),
		ToolCalls: a.toolCalls,
	}
	if a.rec.path != "" {
		rec.Transcript = a.rec.path
	}
	return &Outcome{
		Final:      a.final,
		Partial:    a.partial,
		StopReason: a.stop,
		Record:     rec,
		Findings:   append([]result.Finding(nil), a.findings...),
		Commands:   append([]result.Command(nil), a.commands...),
	}
}
