package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/tools"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
)

// errStalled is the cause of the work context when the watchdog fires.
var errStalled = errors.New("no progress from the model or the tools")

// maxParallelTools bounds how many read-only calls of one turn run at once.
const maxParallelTools = 4

// commandOutputCap is how much of each stream a recorded command keeps (head and tail).
const commandOutputCap = 64 << 10

// maxInfraErrors ends the run after this many sandbox failures in a row.
const maxInfraErrors = 3

// watchdog tracks the last sign of progress.
type watchdog struct {
	last atomic.Int64
}

func (w *watchdog) beat() { w.last.Store(time.Now().UnixNano()) }

// beat records progress on the current watchdog, if any.
func (a *Agent) beat() {
	if w := a.wd.Load(); w != nil {
		w.beat()
	}
}

// workContext derives the context the agent acts under: the caller's deadline minus the
// final-answer reserve, cancelled with errStalled by the watchdog.
func (a *Agent) workContext(ctx context.Context) (context.Context, func()) {
	var stops []func()
	work := ctx
	if dl, ok := ctx.Deadline(); ok {
		c, cancel := context.WithDeadline(ctx, dl.Add(-a.reserve))
		work, stops = c, append(stops, cancel)
	}
	c, cancelCause := context.WithCancelCause(work)
	work = c
	stops = append(stops, func() { cancelCause(nil) })
	a.wd.Store(nil)
	if timeout := a.opts.StallTimeout; timeout > 0 {
		w := &watchdog{}
		w.beat()
		a.wd.Store(w)
		done := make(chan struct{})
		tick := min(max(timeout/4, 10*time.Millisecond), time.Second)
		go func() {
			t := time.NewTicker(tick)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-work.Done():
					return
				case <-t.C:
					if time.Since(time.Unix(0, w.last.Load())) > timeout {
						cancelCause(errStalled)
						return
					}
				}
			}
		}()
		stops = append(stops, func() { close(done) })
	}
	return work, func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		a.wd.Store(nil)
	}
}

// stopReason says why the agent must stop acting, or "".
func stopReason(parent, work context.Context) string {
	if err := parent.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return StopTimeout
		}
		return StopInterrupted
	}
	if errors.Is(context.Cause(work), errStalled) {
		return StopStalled
	}
	if work.Err() != nil {
		return StopTimeout
	}
	return ""
}

// drive runs turns until an answer or a stop. Called with mu held.
func (a *Agent) drive(ctx context.Context) (*Outcome, error) {
	defer a.rec.close()
	work, stop := a.workContext(ctx)
	defer stop()
	a.env.Progress = a.beat
	if a.opts.Approval.Mode == ModeSmart && a.policy.Home == "" {
		// --smart judges relative paths by whether commands start in the home directory.
		home, err := a.env.Home(work)
		if err != nil {
			return a.fail(fmt.Errorf("agent: finding the sandbox's home directory: %w", err))
		}
		a.policy.Home = home
	}
	nudged := false
	for {
		if r := stopReason(ctx, work); r != "" {
			return a.stopped(ctx, r)
		}
		if r := a.budgetReason(); r != "" {
			return a.finish(ctx, r)
		}
		resp, err := a.call(work, false, 0)
		if err != nil {
			if r := stopReason(ctx, work); r != "" {
				return a.stopped(ctx, r)
			}
			return a.fail(fmt.Errorf("agent: model call: %w", err))
		}
		a.turns++
		msg := resp.Message
		if len(msg.ToolCalls) == 0 {
			text := strings.TrimSpace(msg.Text)
			switch {
			case resp.StopReason == model.StopRefusal:
				a.appendAssistant(msg)
				a.rec.warn("refusal", "the model declined the task")
				return a.done(StopRefused, msg.Text)
			case text == "" && !nudged:
				nudged = true
				a.rec.warn("empty_answer", "the model ended its turn without an answer; asking it to continue")
				a.messages = append(a.messages, model.Message{Role: model.RoleUser,
					Text: "[talkops] Your last reply was empty. Continue the task with your tools, or give your final answer now."})
				continue
			case text == "":
				a.rec.warn("empty_answer", "the model ended without an answer twice; stopping")
				return a.done(StopEmpty, "")
			}
			if resp.StopReason == model.StopMaxTokens {
				a.rec.warn("max_tokens", "the final answer was cut at the reply token limit")
			}
			a.appendAssistant(msg)
			return a.done(StopDone, msg.Text)
		}
		a.appendAssistant(msg)
		if err := a.runTools(work, msg.ToolCalls); err != nil {
			if r := stopReason(ctx, work); r != "" {
				return a.stopped(ctx, r)
			}
			return a.fail(fmt.Errorf("agent: %w", err))
		}
	}
}

func (a *Agent) appendAssistant(m model.Message) {
	if strings.TrimSpace(m.Text) == "" && len(m.ToolCalls) == 0 {
		return
	}
	a.messages = append(a.messages, m)
}

// done ends a pass with the model's answer.
func (a *Agent) done(reason, text string) (*Outcome, error) {
	a.final = a.redact.Redact(text)
	a.stop, a.partial = reason, false
	a.closeOut()
	return a.outcome(), nil
}

// closeOut applies the denial rule and warns about denials.
func (a *Agent) closeOut() {
	if len(a.denials) == 0 {
		return
	}
	a.rec.warn("denials", "%d tool call(s) were denied by the %s approval policy; see result.json agent.denials", len(a.denials), a.opts.Approval.Mode)
	if a.opts.Approval.Mode == ModeDefault && !a.partial {
		a.partial = true
		a.stop = StopApprovalRequired
	}
}

// fail ends the run on an infrastructure error.
func (a *Agent) fail(err error) (*Outcome, error) {
	a.stop = StopError
	if a.final == "" {
		a.final = a.redact.Redact(a.fallback(StopError))
	}
	a.rec.warn("error", "%v", err)
	return a.outcome(), err
}

// stopped handles a stop signalled by the contexts.
func (a *Agent) stopped(ctx context.Context, reason string) (*Outcome, error) {
	if reason == StopInterrupted {
		a.stop, a.partial = StopInterrupted, true
		a.final = a.redact.Redact(a.fallback(reason))
		a.rec.warn("budget", "interrupted: %v", context.Cause(ctx))
		return a.outcome(), fmt.Errorf("agent interrupted: %w", ctx.Err())
	}
	return a.finish(ctx, reason)
}

// fallback is the final answer when the model could not give one.
func (a *Agent) fallback(reason string) string {
	note := fmt.Sprintf("[talkops: the agent stopped (%s) before giving a final answer]", reason)
	if strings.TrimSpace(a.lastAnswer) != "" {
		return strings.TrimSpace(a.lastAnswer) + "\n\n" + note
	}
	return note
}

// budgetNote tells the model which budget ran out.
func (a *Agent) budgetNote(reason string) string {
	var what string
	switch reason {
	case StopMaxTurns:
		what = fmt.Sprintf("The turn budget (%d turns) is used up.", a.opts.MaxTurns)
	case StopMaxCost:
		what = fmt.Sprintf("The cost budget ($%.2f) is used up.", a.opts.MaxCostUSD)
	case StopTimeout:
		what = "The time limit is reached."
	case StopStalled:
		what = fmt.Sprintf("The run stalled: nothing progressed for %s.", a.opts.StallTimeout)
	}
	return "[talkops] " + what + " Tools are no longer available. Reply now with your final answer: what you did, " +
		"what you found (list any issue you did not report with report_finding — it can no longer be recorded), and what remains undone."
}

// finish asks for a final answer without tools after a budget ran out.
func (a *Agent) finish(ctx context.Context, reason string) (*Outcome, error) {
	a.exhausted, a.partial, a.stop = reason, true, reason
	a.messages = append(a.messages, model.Message{Role: model.RoleUser, Text: a.budgetNote(reason)})
	maxTokens := 0
	if a.opts.MaxCostUSD > 0 {
		maxTokens = a.affordableFinalTokens()
	}
	defer a.closeOut()
	if maxTokens < 0 {
		a.rec.warn("budget", "%s: the cost budget cannot pay for a final answer; using the last reply", reason)
		a.final = a.redact.Redact(a.fallback(reason))
		return a.outcome(), nil
	}
	a.rec.warn("budget", "%s: asking the model for its final answer without tools", reason)
	timeout := 5 * time.Minute
	switch {
	case reason == StopTimeout:
		timeout = a.reserve
	case reason == StopStalled && a.opts.StallTimeout > 0:
		timeout = min(a.opts.StallTimeout, timeout)
	}
	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := a.call(fctx, true, maxTokens)
	if err != nil {
		a.rec.warn("final_answer_failed", "the final answer call failed: %v", err)
		a.final = a.redact.Redact(a.fallback(reason))
		return a.outcome(), nil
	}
	text := strings.TrimSpace(resp.Message.Text)
	a.appendAssistant(model.Message{Role: model.RoleAssistant, Text: resp.Message.Text})
	if text == "" {
		a.final = a.redact.Redact(a.fallback(reason))
	} else {
		a.final = a.redact.Redact(resp.Message.Text)
	}
	if a.opts.MaxCostUSD > 0 && a.usage.CostUSD > a.opts.MaxCostUSD {
		a.rec.warn("budget", "the model spend $%.4f exceeded the cap $%.2f (the estimate of the last call was low)", a.usage.CostUSD, a.opts.MaxCostUSD)
	}
	return a.outcome(), nil
}

// call makes one model request. final requests carry no usable tools.
func (a *Agent) call(ctx context.Context, final bool, maxTokens int) (model.Response, error) {
	if maxTokens == 0 {
		maxTokens = a.opts.MaxTokens
	}
	req := model.Request{System: a.system, Messages: a.messages, Tools: a.defs(), MaxTokens: maxTokens}
	if final {
		req.ToolChoice = model.ToolChoiceNone
	}
	turn := a.turns + 1
	if final {
		turn = a.turns
	}
	data := ModelRequestData{Turn: turn, Final: final, NewMessages: a.messages[a.sent:], Messages: len(a.messages), MaxTokens: maxTokens}
	if a.sent == 0 {
		data.System = a.system
		for _, t := range req.Tools {
			data.Tools = append(data.Tools, t.Name)
		}
	}
	label := fmt.Sprintf("turn %d", turn)
	if final {
		label = "final answer"
	}
	a.rec.emit(events.ModelRequest, fmt.Sprintf("%s: model request (%d new messages)", label, len(data.NewMessages)), data)
	a.sent = len(a.messages)
	a.lastCallLen = len(a.messages)
	a.beat()
	ctx = model.WithProgress(ctx, a.beat) // a streaming reply is progress
	ctx = model.WithRetryHook(ctx, func(e model.RetryEvent) {
		a.beat()
		a.rec.warn("retry", "%v; retrying in %s (attempt %d)", e.Err, e.Wait.Round(time.Millisecond), e.Attempt+1)
	})
	start := time.Now()
	resp, err := a.opts.Model.Complete(ctx, req)
	a.beat()
	if err != nil {
		return resp, err
	}
	a.usage = a.usage.Add(resp.Usage)
	a.lastUsage = resp.Usage
	a.maxOutput = max(a.maxOutput, resp.Usage.OutputTokens)
	if strings.TrimSpace(resp.Message.Text) != "" {
		a.lastAnswer = resp.Message.Text
	}
	// Keep the redacted reply in the history the model sees next.
	resp.Message.Text = a.redact.Redact(resp.Message.Text)
	a.rec.emit(events.ModelResponse, fmt.Sprintf("%s: %s, %d tool call(s), %d+%d tokens", label, resp.StopReason, len(resp.Message.ToolCalls), resp.Usage.TotalInput(), resp.Usage.OutputTokens),
		ModelResponseData{
			Turn: turn, Final: final, Text: resp.Message.Text, ToolCalls: resp.Message.ToolCalls, StopReason: resp.StopReason,
			Model: resp.Model, Usage: resp.Usage, DurationMS: time.Since(start).Milliseconds(), TotalCostUSD: a.usage.CostUSD,
		})
	return resp, nil
}

func (a *Agent) defs() []model.Tool {
	if a.toolDefs == nil {
		for _, t := range a.tools {
			a.toolDefs = append(a.toolDefs, t.Def())
		}
	}
	return a.toolDefs
}

// --- tools -----------------------------------------------------------------------------

// parallelSafe reports whether a call may run alongside others: an allowed read-only tool.
func (a *Agent) parallelSafe(c model.ToolCall) bool {
	t, ok := a.byName[c.Name]
	return ok && t.Kind() == tools.ReadOnly && a.policy.decide(c.Name, t.Kind(), c.Input).Allow
}

// runTools runs one turn's calls: consecutive read-only calls in parallel, the others one
// by one in order. Every call gets a result, even when the run stops midway, so the
// conversation stays valid. The error is an infrastructure failure.
func (a *Agent) runTools(ctx context.Context, calls []model.ToolCall) error {
	turn := a.turns
	results := make([]model.ToolResult, len(calls))
	ran := make([]bool, len(calls))
	var infra error
	for i := 0; i < len(calls) && infra == nil && ctx.Err() == nil; {
		j := i + 1
		if a.parallelSafe(calls[i]) {
			for j < len(calls) && a.parallelSafe(calls[j]) {
				j++
			}
		}
		if j-i == 1 {
			results[i], infra = a.runOne(ctx, turn, calls[i])
			ran[i] = true
		} else {
			var wg sync.WaitGroup
			sem := make(chan struct{}, maxParallelTools)
			errs := make([]error, j-i)
			for k := i; k < j; k++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem <- struct{}{}
					defer func() { <-sem }()
					// A panic on this goroutine would kill talkops before teardown.
					defer func() {
						if p := recover(); p != nil {
							errs[k-i] = fmt.Errorf("internal error in tool %s: %v", calls[k].Name, p)
						}
					}()
					results[k], errs[k-i] = a.runOne(ctx, turn, calls[k])
				}()
				ran[k] = true
			}
			wg.Wait()
			infra = errors.Join(errs...)
		}
		i = j
	}
	for k, c := range calls {
		if !ran[k] {
			results[k] = model.ToolResult{CallID: c.ID, Name: c.Name, IsError: true,
				Content: "Not run: the run stopped before this call."}
		}
	}
	a.messages = append(a.messages, model.Message{Role: model.RoleUser, ToolResults: results})
	return infra
}

// runOne approves and runs one call. It is safe to run concurrently with other calls.
func (a *Agent) runOne(ctx context.Context, turn int, c model.ToolCall) (model.ToolResult, error) {
	mu := &a.smu
	mu.Lock()
	a.toolCalls++
	n := a.toolCalls
	mu.Unlock()

	a.rec.emit(events.ToolCall, fmt.Sprintf("%s %s", c.Name, summarize(c)), ToolCallData{Turn: turn, CallID: c.ID, Tool: c.Name, Input: c.Input})
	res := model.ToolResult{CallID: c.ID, Name: c.Name}
	t, ok := a.byName[c.Name]
	if !ok {
		names := make([]string, len(a.tools))
		for i, t := range a.tools {
			names[i] = t.Def().Name
		}
		res.IsError = true
		res.Content = fmt.Sprintf("Error: there is no tool %q; the tools are %s.", c.Name, strings.Join(names, ", "))
		a.emitResult(turn, c, res, len(res.Content), "", nil, 0)
		return res, nil
	}
	if d := a.policy.decide(c.Name, t.Kind(), c.Input); !d.Allow {
		input := a.redact.Redact(string(c.Input))
		mu.Lock()
		a.denials = append(a.denials, result.Denial{Tool: c.Name, Input: shorten(input, 2000), Reason: d.Reason, Turn: turn})
		mu.Unlock()
		a.rec.emit(events.ToolDenied, fmt.Sprintf("%s denied: %s", c.Name, d.Reason),
			ToolDeniedData{Turn: turn, CallID: c.ID, Tool: c.Name, Input: c.Input, Reason: d.Reason, Mode: a.opts.Approval.Mode.String()})
		res.IsError = true
		res.Content = fmt.Sprintf("Denied by the approval policy (%s mode): %s. The call was not run. Do not retry it with small variations; "+
			"continue without it and say in your final answer what was blocked.", a.opts.Approval.Mode, d.Reason)
		return res, nil
	}

	a.beat()
	start := time.Now()
	out, err := t.Run(ctx, c.Input)
	a.beat()
	if err != nil {
		res.IsError = true
		if ctx.Err() != nil {
			res.Content = "Not completed: the run stopped while this call was running."
			a.emitResult(turn, c, res, len(res.Content), "", nil, time.Since(start))
			return res, nil
		}
		msg := a.redact.Redact(err.Error())
		res.Content = "Error: the sandbox failed to run this call: " + msg
		a.emitResult(turn, c, res, len(res.Content), "", nil, time.Since(start))
		mu.Lock()
		a.infraErrs++
		fatal := a.infraErrs >= maxInfraErrors || errors.Is(err, providers.ErrClosed)
		mu.Unlock()
		if fatal {
			return res, fmt.Errorf("tool %s: %w", c.Name, err)
		}
		a.rec.warn("sandbox", "%s failed in the sandbox (%s); the model may retry", c.Name, msg)
		return res, nil
	}
	mu.Lock()
	a.infraErrs = 0
	mu.Unlock()

	full := a.redact.Redact(out.Output)
	shown, file := a.cut(n, full)
	res.Content, res.IsError = shown, out.IsError
	var exit *int
	if out.Exec != nil {
		exit = &out.Exec.ExitCode
		stdout, cut1 := headTail(a.redact.Redact(out.Exec.Stdout), commandOutputCap)
		stderr, cut2 := headTail(a.redact.Redact(out.Exec.Stderr), commandOutputCap)
		argv := make([]string, len(out.Exec.Argv))
		for i, s := range out.Exec.Argv {
			argv[i] = a.redact.Redact(s)
		}
		mu.Lock()
		c := *out.Exec
		c.Pass, c.Turn, c.Command, c.Argv = a.pass, turn, a.redact.Redact(c.Command), argv
		c.Stdout, c.Stderr, c.Truncated, c.OutputFile = stdout, stderr, cut1 || cut2 || c.Truncated, file
		a.commands = append(a.commands, c)
		mu.Unlock()
	}
	if f := out.Finding; f != nil {
		g := *f
		g.Path, g.Title, g.Message, g.Rule = a.redact.Redact(g.Path), a.redact.Redact(g.Title), a.redact.Redact(g.Message), a.redact.Redact(g.Rule)
		g.Fingerprint = tools.Fingerprint(g)
		mu.Lock()
		dup := a.seenFP[g.Fingerprint]
		if !dup {
			a.seenFP[g.Fingerprint] = true
			a.findings = append(a.findings, g)
		}
		mu.Unlock()
		if dup {
			res.Content = "Already recorded: a finding with the same rule, path, title and message exists."
		} else {
			a.rec.finding(g)
		}
	}
	a.emitResult(turn, c, res, len(full), file, exit, time.Since(start))
	return res, nil
}

func (a *Agent) emitResult(turn int, c model.ToolCall, res model.ToolResult, size int, file string, exit *int, d time.Duration) {
	status := "ok"
	if res.IsError {
		status = "error"
	}
	if exit != nil {
		status = fmt.Sprintf("exit %d", *exit)
	}
	a.rec.emit(events.ToolResult, fmt.Sprintf("%s: %s (%d bytes)", c.Name, status, size), ToolResultData{
		Turn: turn, CallID: c.ID, Tool: c.Name, IsError: res.IsError, Output: res.Content,
		OutputBytes: size, OutputFile: file, ExitCode: exit, DurationMS: d.Milliseconds(),
	})
}

// summarize is a one-line description of a call for event messages.
func summarize(c model.ToolCall) string {
	var in map[string]any
	if json.Unmarshal(c.Input, &in) != nil {
		return shorten(strings.TrimSpace(string(c.Input)), 120)
	}
	for _, k := range []string{"command", "path", "pattern", "url", "title"} {
		if v, ok := in[k].(string); ok && v != "" {
			return shorten(strings.Join(strings.Fields(v), " "), 120)
		}
	}
	return ""
}

// cut shortens a tool output for the model, saving the whole of it as
// tool-outputs/<n>.txt when it is cut. It returns the text for the model and the saved
// file (relative to the report directory, "" if none).
func (a *Agent) cut(n int, full string) (string, string) {
	limit := a.opts.MaxToolOutput
	if len(full) <= limit {
		return full, ""
	}
	rel := ""
	if a.opts.ReportDir != "" {
		name := filepath.Join("tool-outputs", fmt.Sprintf("%d.txt", n))
		p := filepath.Join(a.opts.ReportDir, name)
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		if err == nil {
			err = os.WriteFile(p, []byte(full), 0o644)
		}
		if err != nil {
			a.rec.warn("transcript", "cannot save the full tool output: %v", err)
		} else {
			rel = filepath.ToSlash(name)
		}
	}
	budget := max(limit-300, limit/2) // room for the marker
	head, tail := splitHeadTail(full, budget)
	omitted := len(full) - len(head) - len(tail)
	where := "it was not kept"
	if rel != "" {
		where = "the whole output is saved as " + rel + " in the run's report"
	}
	marker := fmt.Sprintf("\n[… %d of %d bytes omitted here (%s). To see the middle, re-run with a filter (grep, head, tail, sed -n) or read a narrower window …]\n",
		omitted, len(full), where)
	return head + marker + tail, rel
}

// splitHeadTail returns the first and last parts of s, together about n bytes, cut at
// line boundaries when one is near and never inside a UTF-8 sequence.
func splitHeadTail(s string, n int) (string, string) {
	if len(s) <= n {
		return s, ""
	}
	h := n * 2 / 5
	t := n - h
	head := s[:h]
	if i := strings.LastIndexByte(head, '\n'); i > h*4/5 {
		head = head[:i+1]
	}
	for len(head) > 0 && !utf8.ValidString(head[max(len(head)-utf8.UTFMax, 0):]) {
		head = head[:len(head)-1]
	}
	tail := s[len(s)-t:]
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < t/5 {
		tail = tail[i+1:]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return head, tail
}

// headTail caps s at n bytes (head and tail with a marker) and reports whether it cut.
func headTail(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	head, tail := splitHeadTail(s, n)
	return head + fmt.Sprintf("\n[… %d bytes omitted …]\n", len(s)-len(head)-len(tail)) + tail, true
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// --- budgets ---------------------------------------------------------------------------

// budgetReason names the budget that forbids another acting turn, or "".
func (a *Agent) budgetReason() string {
	if a.turns >= a.opts.MaxTurns {
		return StopMaxTurns
	}
	if a.opts.MaxCostUSD > 0 {
		out := a.expectedOutputTokens()
		next := a.inputCost(0) + out*a.price.Output/1e6
		wrap := a.inputCost(out+finalNoteTokens) + finalReplyTokens*a.price.Output/1e6
		if a.usage.CostUSD+next+wrap > a.opts.MaxCostUSD {
			return StopMaxCost
		}
	}
	return ""
}

// Token estimates for the cost budget.
const (
	bytesPerToken    = 3.0  // conservative: code and JSON run 3-4 bytes a token
	finalNoteTokens  = 300  // the budget note and overhead of the final call
	finalReplyTokens = 1024 // the final answer the budget reserves for
	minFinalTokens   = 256
	maxFinalTokens   = 4096
)

// inputCost estimates the input cost of the next call with extra tokens added: what the
// previous call read plus what it wrote are read again (from the cache when the provider
// caches), and the messages added since are new.
func (a *Agent) inputCost(extra float64) float64 {
	p := a.price
	fresh := max(p.Input, p.CacheWrite)
	newBytes := 0
	for _, m := range a.messages[min(a.lastCallLen, len(a.messages)):] {
		newBytes += messageBytes(m)
	}
	newTok := float64(newBytes)/bytesPerToken + extra
	if a.lastUsage == (model.Usage{}) {
		all := len(a.system)
		for _, t := range a.defs() {
			all += len(t.Name) + len(t.Description) + len(t.Schema)
		}
		return (float64(all)/bytesPerToken + newTok) * fresh / 1e6
	}
	cached := p.Input
	if a.lastUsage.CacheReadTokens+a.lastUsage.CacheWriteTokens > 0 && p.CacheRead > 0 {
		cached = p.CacheRead
	}
	prev := float64(a.lastUsage.TotalInput() + a.lastUsage.OutputTokens)
	return (prev*cached + newTok*fresh) / 1e6
}

func (a *Agent) expectedOutputTokens() float64 {
	out := float64(max(a.maxOutput, 1024))
	if a.opts.MaxTokens > 0 {
		out = min(out, float64(a.opts.MaxTokens))
	}
	return out
}

// affordableFinalTokens returns the max_tokens the cost budget pays for in the final
// call, or -1 when it cannot pay for a useful answer.
func (a *Agent) affordableFinalTokens() int {
	left := a.opts.MaxCostUSD - a.usage.CostUSD - a.inputCost(finalNoteTokens)
	if a.price.Output <= 0 {
		return 0 // free output: no cap needed
	}
	tok := math.Floor(left / a.price.Output * 1e6)
	if tok < minFinalTokens {
		return -1
	}
	return int(min(tok, maxFinalTokens))
}

func messageBytes(m model.Message) int {
	n := len(m.Text)
	for _, c := range m.ToolCalls {
		n += len(c.Name) + len(c.Input) + 32
	}
	for _, r := range m.ToolResults {
		n += len(r.Content) + 32
	}
	return n
}
