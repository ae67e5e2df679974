// Package judge grades a rubric's criteria with a model: it gathers evidence the runner
// recorded, shows it nonce-fenced, reads verdicts only from a submit_verdicts tool call
// with a strict schema, validates every evidence reference in code, takes a majority of
// independent votes, and turns whatever cannot be graded into an error, never a pass.
//
// Criteria that select the same evidence are graded in one call (up to
// MaxCriteriaPerCall); a free-text rubric, whose criteria all use the default selection,
// is one call per vote, as in the TalkOps contract.
package judge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/rubric/evidence"
)

// Defaults and limits.
const (
	// DefaultTimeout bounds one judge call attempt.
	DefaultTimeout = 3 * time.Minute
	// DefaultParallel bounds concurrent judge calls.
	DefaultParallel = 4
	// DefaultMaxTokens caps one judge reply.
	DefaultMaxTokens = 4096
	// MaxCriteriaPerCall bounds the criteria graded in one call.
	MaxCriteriaPerCall = 8
	// MaxVotes is the largest number of votes per criterion.
	MaxVotes = 9
	// attempts is one call plus one retry.
	attempts = 2
)

// ErrOptions is wrapped by every error New returns: a bad option is a usage error.
var ErrOptions = errors.New("invalid judge options")

// Options configure a Judge.
type Options struct {
	// Model answers the judge calls (required).
	Model model.Model
	// ModelName is recorded with every judged item, e.g. "anthropic:claude-sonnet-4-5".
	ModelName string
	// Votes is the number of independent calls per criterion (odd, 1-9); 0 uses the
	// rubric's [judge] votes.
	Votes int
	// MaxEvidenceBytes is the evidence budget of one call; 0 uses the rubric's [judge]
	// max_evidence_bytes.
	MaxEvidenceBytes int
	// Timeout bounds one call attempt (0: DefaultTimeout).
	Timeout time.Duration
	// Redact is applied to all evidence before a model sees it and to everything the
	// judge returns (gaps, reasoning, errors, sources).
	Redact func(string) string
	// Sink receives model.request/model.response events for judge calls and a warning
	// per evidence item that looks like a prompt-injection attempt.
	Sink events.Sink
	// Parallel bounds concurrent calls (0: DefaultParallel).
	Parallel int
	// MaxTokens caps one reply (0: DefaultMaxTokens).
	MaxTokens int
}

// Judge grades criteria with a model. It is safe for concurrent use.
type Judge struct {
	opts Options
}

var _ rubric.Judge = (*Judge)(nil)

// New checks opts and returns a Judge. Every error names the option and what is valid.
func New(opts Options) (*Judge, error) {
	switch {
	case opts.Model == nil:
		return nil, fmt.Errorf("%w: no model (set --rubric-model, or a model for the agent)", ErrOptions)
	case opts.Votes < 0 || opts.Votes > MaxVotes || (opts.Votes > 0 && opts.Votes%2 == 0):
		return nil, fmt.Errorf("%w: votes must be odd so that a majority exists (1, 3, 5, 7 or 9), got %d", ErrOptions, opts.Votes)
	case opts.MaxEvidenceBytes < 0 || (opts.MaxEvidenceBytes > 0 && opts.MaxEvidenceBytes < 1000):
		return nil, fmt.Errorf("%w: the evidence budget must be at least 1000 bytes, got %d", ErrOptions, opts.MaxEvidenceBytes)
	case opts.Timeout < 0:
		return nil, fmt.Errorf("%w: the call timeout must not be negative, got %s", ErrOptions, opts.Timeout)
	case opts.Parallel < 0 || opts.MaxTokens < 0:
		return nil, fmt.Errorf("%w: Parallel and MaxTokens must not be negative", ErrOptions)
	}
	if opts.ModelName == "" {
		if s, ok := opts.Model.(fmt.Stringer); ok {
			opts.ModelName = s.String()
		}
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Parallel == 0 {
		opts.Parallel = DefaultParallel
	}
	if opts.MaxTokens == 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	if opts.Sink == nil {
		opts.Sink = events.Discard
	}
	return &Judge{opts: opts}, nil
}

// CallEvent is the Data of the model.request and model.response events of a judge call.
type CallEvent struct {
	Iteration     int      `json:"iteration"`
	Criteria      []string `json:"criteria"`
	Vote          int      `json:"vote"`
	Attempt       int      `json:"attempt"`
	Model         string   `json:"model,omitempty"`
	EvidenceItems int      `json:"evidence_items"`
	EvidenceBytes int      `json:"evidence_bytes"`
	InputTokens   int64    `json:"input_tokens,omitempty"`
	OutputTokens  int64    `json:"output_tokens,omitempty"`
	CostUSD       float64  `json:"cost_usd,omitempty"`
	DurationMS    int64    `json:"duration_ms,omitempty"`
	Error         string   `json:"error,omitempty"`
}

// InjectionEvent is the Data of the warning event for evidence that looks like a
// prompt-injection attempt.
type InjectionEvent struct {
	Iteration int    `json:"iteration"`
	Source    string `json:"source"`
	Rule      string `json:"rule"`
	Match     string `json:"match"`
	Line      int    `json:"line,omitempty"`
}

// group is the criteria graded together and the evidence they see.
type group struct {
	crit     []rubric.Criterion
	ids      []string
	bundle   *evidence.Bundle
	findings []result.Finding
}

// callResult is the outcome of one vote of one group.
type callResult struct {
	verdicts map[string]verdict
	err      string // set when the vote failed as a whole
	usage    model.Usage
	duration time.Duration
}

// Grade implements rubric.Judge. It returns one item per criterion; failures of the
// model are error items, and only a request without a rubric is an error.
func (j *Judge) Grade(ctx context.Context, req rubric.JudgeRequest) ([]result.Item, error) {
	if req.Rubric == nil {
		return nil, errors.New("judge: the request has no rubric")
	}
	if len(req.Criteria) == 0 {
		return nil, nil
	}
	votes := j.opts.Votes
	if votes == 0 {
		votes = max(req.Rubric.Judge.Votes, 1)
	}
	budget := j.opts.MaxEvidenceBytes
	if budget == 0 {
		budget = req.Rubric.Judge.MaxEvidenceBytes
	}
	if budget == 0 {
		budget = rubric.DefaultMaxEvidenceBytes
	}

	g := &gatherer{req: req, redact: j.redact}
	groups := groupCriteria(req.Criteria)
	scanned := map[string][]result.Finding{} // by evidence sha256 and source
	for _, gr := range groups {
		gr.bundle = evidence.Build(g.sources(ctx, gr.crit[0].Evidence), budget)
		for _, it := range gr.bundle.Items {
			key := it.SHA256 + "\x00" + it.Source
			f, ok := scanned[key]
			if !ok {
				f = j.scan(req, it)
				scanned[key] = f
			}
			gr.findings = append(gr.findings, f...)
		}
	}

	// A pool of workers takes the calls in order (group by group, vote by vote), so
	// Parallel 1 is sequential and deterministic.
	type task struct{ g, v int }
	results := make([][]callResult, len(groups))
	for gi := range groups {
		results[gi] = make([]callResult, votes)
	}
	tasks := make(chan task)
	var wg sync.WaitGroup
	for range min(j.opts.Parallel, len(groups)*votes) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tk := range tasks {
				results[tk.g][tk.v] = j.safeVote(ctx, req, groups[tk.g], tk.v+1)
			}
		}()
	}
	for gi := range groups {
		for v := range votes {
			tasks <- task{gi, v}
		}
	}
	close(tasks)
	wg.Wait()

	var items []result.Item
	for gi, gr := range groups {
		items = append(items, j.items(gr, results[gi])...)
	}
	return items, nil
}

// groupCriteria puts criteria with the same evidence selection together, in rubric order,
// at most MaxCriteriaPerCall per group.
func groupCriteria(crit []rubric.Criterion) []*group {
	var out []*group
	byKey := map[string]*group{}
	for _, c := range crit {
		sels := make([]string, len(c.Evidence))
		for i, s := range c.Evidence {
			sels[i] = s.String()
		}
		slices.Sort(sels)
		key := strings.Join(slices.Compact(sels), "\x00")
		gr := byKey[key]
		if gr == nil || len(gr.crit) == MaxCriteriaPerCall {
			gr = &group{}
			byKey[key] = gr
			out = append(out, gr)
		}
		gr.crit = append(gr.crit, c)
		gr.ids = append(gr.ids, c.ID)
	}
	return out
}

// vote makes one independent judgement of a group: a call, and one retry when the call
// fails, times out or answers outside the schema (the retry shows the model what was
// wrong with its answer).
// safeVote is vote with a panic turned into a failed vote: a vote runs on its own
// goroutine, where a panic would kill talkops before teardown. A failed vote is an error
// item, never a pass.
func (j *Judge) safeVote(ctx context.Context, req rubric.JudgeRequest, gr *group, n int) (res callResult) {
	defer func() {
		if p := recover(); p != nil {
			res = callResult{err: fmt.Sprintf("internal error in the judge: %v", p)}
		}
	}()
	return j.vote(ctx, req, gr, n)
}

func (j *Judge) vote(ctx context.Context, req rubric.JudgeRequest, gr *group, n int) callResult {
	start := time.Now()
	var out callResult
	defer func() { out.duration = time.Since(start) }()

	nonce := evidence.NewNonce()
	schema, desc := tool(gr.ids)
	mreq := model.Request{
		System:    systemPrompt(nonce, gr.crit),
		Messages:  []model.Message{{Role: model.RoleUser, Text: userMessage(nonce, req.Iteration, req.Rubric.Name, gr.bundle)}},
		Tools:     []model.Tool{{Name: ToolName, Description: desc, Schema: schema}},
		MaxTokens: j.opts.MaxTokens,
	}
	ev := CallEvent{Iteration: req.Iteration, Criteria: gr.ids, Vote: n, Model: j.opts.ModelName,
		EvidenceItems: len(gr.bundle.Items), EvidenceBytes: gr.bundle.Bytes()}
	var last string
	for attempt := 1; attempt <= attempts; attempt++ {
		if ctx.Err() != nil {
			out.err = "interrupted: " + cause(ctx)
			return out
		}
		ev.Attempt = attempt
		j.emit(events.ModelRequest, fmt.Sprintf("judge call: %s (vote %d, attempt %d)", strings.Join(gr.ids, ", "), n, attempt), ev)
		callStart := time.Now()
		cctx, cancel := context.WithTimeout(ctx, j.opts.Timeout)
		resp, err := j.opts.Model.Complete(cctx, mreq)
		timedOut := cctx.Err() != nil && ctx.Err() == nil
		cancel()
		out.usage = out.usage.Add(resp.Usage)
		done := ev
		done.DurationMS = time.Since(callStart).Milliseconds()
		done.InputTokens, done.OutputTokens, done.CostUSD = resp.Usage.TotalInput(), resp.Usage.OutputTokens, resp.Usage.CostUSD
		switch {
		case err != nil && ctx.Err() != nil:
			out.err = "interrupted: " + cause(ctx)
			done.Error = out.err
			j.emit(events.ModelResponse, "judge call interrupted", done)
			return out
		case err != nil && timedOut:
			last = fmt.Sprintf("the judge call timed out after %s", j.opts.Timeout)
		case err != nil:
			last = "the judge call failed: " + j.redact(err.Error())
		default:
			verdicts, problems := parseAnswer(resp, gr.ids)
			if len(problems) == 0 || attempt == attempts {
				// On the last attempt, keep the verdicts that follow the schema; the
				// criteria without one become errors.
				out.verdicts = verdicts
				if len(problems) > 0 {
					last = "the judge answered outside the schema twice: " + j.redact(strings.Join(problems, "; "))
					out.err = last
					done.Error = last
				}
				j.emit(events.ModelResponse, "judge answered", done)
				return out
			}
			last = "the judge answered outside the schema: " + j.redact(strings.Join(problems, "; "))
			mreq.Messages = repairTurn(mreq.Messages, resp.Message, problems, gr.ids)
		}
		done.Error = last
		j.emit(events.ModelResponse, "judge call failed: "+last, done)
	}
	out.err = last
	return out
}

// repairTurn appends the invalid reply and a message saying what was wrong. Every tool
// call of the reply gets a result (the APIs require it).
func repairTurn(msgs []model.Message, reply model.Message, problems, ids []string) []model.Message {
	text := repairMessage(problems, ids)
	if len(reply.ToolCalls) == 0 && strings.TrimSpace(reply.Text) == "" {
		// An empty reply cannot be replayed: ask again with the original conversation.
		return msgs
	}
	calls := slices.Clone(reply.ToolCalls)
	for i, tc := range calls {
		// A malformed input cannot be replayed (the Messages API rejects a tool_use whose
		// input is not an object); the tool result says what was wrong with it.
		var obj map[string]json.RawMessage
		if json.Unmarshal(tc.Input, &obj) != nil {
			calls[i].Input = json.RawMessage(`{}`)
		}
	}
	reply.ToolCalls = calls
	out := append(slices.Clone(msgs), model.Message{Role: model.RoleAssistant, Text: reply.Text, ToolCalls: reply.ToolCalls})
	if len(reply.ToolCalls) == 0 {
		return append(out, model.Message{Role: model.RoleUser, Text: text})
	}
	res := make([]model.ToolResult, len(reply.ToolCalls))
	for i, tc := range reply.ToolCalls {
		res[i] = model.ToolResult{CallID: tc.ID, Name: tc.Name, Content: text, IsError: true}
	}
	return append(out, model.Message{Role: model.RoleUser, ToolResults: res})
}

// items combines the votes of a group into one item per criterion.
func (j *Judge) items(gr *group, res []callResult) []result.Item {
	var usage model.Usage
	var dur time.Duration
	for _, r := range res {
		usage = usage.Add(r.usage)
		dur = max(dur, r.duration)
	}
	shares := splitUsage(usage, len(gr.crit))
	descs := make([]result.Evidence, len(gr.bundle.Items))
	for i, it := range gr.bundle.Items {
		descs[i] = result.Evidence{ID: it.ID, Source: j.redact(it.Source), SHA256: it.SHA256, Bytes: it.Bytes(), Truncated: it.Truncated}
	}
	out := make([]result.Item, len(gr.crit))
	for ci, c := range gr.crit {
		votes := make([]result.Vote, len(res))
		for vi, r := range res {
			v, ok := r.verdicts[c.ID]
			if !ok {
				msg := r.err
				if msg == "" {
					msg = "the judge returned no verdict for this criterion"
				}
				votes[vi] = result.Vote{Verdict: VoteError, Error: msg}
				continue
			}
			votes[vi] = decide(v, gr.bundle, j.redact)
		}
		it := result.Item{
			ID: c.ID, Kind: rubric.KindJudge, Title: c.Title, Required: c.Required, Weight: c.Weight,
			DurationMS: dur.Milliseconds(),
			Judge: &result.Judge{Model: j.opts.ModelName, Votes: votes, Evidence: descs,
				PromptVersion: PromptVersion, Usage: shares[ci]},
			Findings: slices.Clone(gr.findings),
		}
		if it.Title == "" {
			it.Title = c.Question
		}
		j.tally(&it, c.Required)
		out[ci] = it
	}
	return out
}

// tally sets the item's status from its votes: the verdict of a strict majority wins; a
// split (votes that differ) is unstable; no majority, or insufficient evidence, fails a
// required criterion and is an error otherwise; a majority of errors is an error.
func (j *Judge) tally(it *result.Item, required bool) {
	votes := it.Judge.Votes
	count := map[string]int{}
	for _, v := range votes {
		count[v.Verdict]++
	}
	it.Unstable = len(count) > 1
	majority := ""
	for _, verdict := range []string{VotePass, VoteFail, VoteInsufficient, VoteError} {
		if count[verdict]*2 > len(votes) {
			majority = verdict
		}
	}
	first := func(verdict string) result.Vote {
		for _, v := range votes {
			if v.Verdict == verdict {
				return v
			}
		}
		return result.Vote{}
	}
	insufficient := func(reason string) {
		if required {
			it.Status, it.Score = result.StatusFail, ptr(0.0)
		} else {
			it.Status = result.StatusError
		}
		it.Reason = reason
	}
	switch majority {
	case VotePass:
		it.Status, it.Score = result.StatusPass, ptr(1.0)
		it.Reason = firstLine(first(VotePass).Reasoning)
	case VoteFail:
		it.Status, it.Score = result.StatusFail, ptr(0.0)
		v := first(VoteFail)
		it.Reason = firstLine(cmpOr(v.Gap, v.Reasoning))
	case VoteInsufficient:
		insufficient("insufficient evidence: " + firstLine(first(VoteInsufficient).Gap))
	case VoteError:
		it.Status = result.StatusError
		it.Reason = "the judge could not grade this criterion: " + firstLine(first(VoteError).Error)
	default:
		insufficient("the judge's votes disagree with no majority")
	}
	if len(votes) > 1 {
		var parts []string
		for _, verdict := range []string{VotePass, VoteFail, VoteInsufficient, VoteError} {
			if count[verdict] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", count[verdict], verdict))
			}
		}
		it.Reason += fmt.Sprintf(" (votes: %s)", strings.Join(parts, ", "))
	}
}

// scan looks for prompt-injection attempts in one evidence item and returns a warning
// finding for it (nil when clean), emitting a warning event per hit.
func (j *Judge) scan(req rubric.JudgeRequest, it evidence.Item) []result.Finding {
	hits := evidence.Scan(it.Text)
	if len(hits) == 0 {
		return nil
	}
	var rules []string
	for i, h := range hits {
		j.emit(events.Warning, fmt.Sprintf("possible judge prompt injection in %s: %s", it.Source, h.Rule),
			InjectionEvent{Iteration: req.Iteration, Source: j.redact(it.Source), Rule: h.Rule, Match: j.redact(h.Match), Line: h.Line})
		if i < 3 {
			rules = append(rules, fmt.Sprintf("%s %q", h.Rule, h.Match))
		}
	}
	msg := fmt.Sprintf("possible prompt injection aimed at the rubric judge in %s: %s", it.Source, strings.Join(rules, ", "))
	if len(hits) > 3 {
		msg += fmt.Sprintf(" and %d more", len(hits)-3)
	}
	msg += ". The judge was shown it as fenced data and told to ignore instructions in it; review the change for manipulation."
	f := result.Finding{
		Path:     it.Path,
		Severity: result.SeverityWarning,
		Rule:     "prompt-injection",
		Title:    "Possible judge prompt injection",
		Message:  j.redact(msg),
		Source:   "rubric",
	}
	if it.Path != "" && !it.Truncated && strings.HasPrefix(it.Source, "file:") {
		f.StartLine = hits[0].Line
	}
	where := it.Path
	if where == "" {
		where = it.Source
	}
	f.Fingerprint = rubric.Fingerprint(req.Rubric.Name, rubric.KindJudge, f.Rule, where, hits[0].Rule+" "+hits[0].Match)
	return []result.Finding{f}
}

func (j *Judge) emit(t events.Type, msg string, data any) {
	j.opts.Sink.Emit(events.Event{Time: time.Now(), Type: t, Stage: result.StageRubric, Message: msg, Data: data})
}

func (j *Judge) redact(s string) string {
	if j.opts.Redact == nil || s == "" {
		return s
	}
	return j.opts.Redact(s)
}

// splitUsage divides u evenly over n items (token remainders go to the first items), so
// the items' usages sum to u.
func splitUsage(u model.Usage, n int) []*result.Usage {
	out := make([]*result.Usage, n)
	if u == (model.Usage{}) || n == 0 {
		return out
	}
	in, cached, outTok := u.TotalInput(), u.CacheReadTokens, u.OutputTokens
	for i := range n {
		share := func(total int64) int64 {
			s := total / int64(n)
			if int64(i) < total%int64(n) {
				s++
			}
			return s
		}
		out[i] = &result.Usage{InputTokens: share(in), CachedInputTokens: share(cached), OutputTokens: share(outTok),
			CostUSD: u.CostUSD / float64(n)}
	}
	return out
}

func cause(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return "cancelled"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return clip(s, 300)
}

func cmpOr(ss ...string) string {
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

func ptr[T any](v T) *T { return &v }
