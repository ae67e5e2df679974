// Package result defines result.json, the single record of a run: what was configured,
// what each stage did, the rubric's verdict and the findings. The runner writes it before
// anything is published and again after teardown; every reporter reads only this.
package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/talkops/talkops/internal/fileread"
)

// Schema identifies the format version. Readers reject other values.
const Schema = "talkops.result/v1"

// Verdict words in result.json.
const (
	VerdictPass  = "pass"
	VerdictFail  = "fail"
	VerdictError = "error"
)

// StageName names a pipeline stage, as result.json, events and logs spell it.
type StageName string

// Stage names.
const (
	StageProvision StageName = "provision"
	StageSync      StageName = "sync"
	StageSetup     StageName = "setup"
	StageAgent     StageName = "agent"
	StageRubric    StageName = "rubric"
	StageTeardown  StageName = "teardown"
	StagePublish   StageName = "publish"
	// StageBaseline records the workspace on the host after the setup script.
	StageBaseline StageName = "baseline"
	// StageChanges records the workspace after an agent pass and computes its change set.
	StageChanges StageName = "changes"
	// StageVerify prepares a clean room: a fresh sandbox with the baseline and the change set.
	StageVerify StageName = "verify"
	// StageReport names the reporters' warnings in events (publishing, seen from a
	// reporter; result.json records their errors under StagePublish).
	StageReport StageName = "report"
)

// StageStatus is how a stage ended (or that it is still running).
type StageStatus string

// Stage statuses.
const (
	StageRunning     StageStatus = "running"
	StageOK          StageStatus = "ok"
	StageFailed      StageStatus = "failed"
	StageSkipped     StageStatus = "skipped"
	StageInterrupted StageStatus = "interrupted" // a signal stopped it
	StageTimeout     StageStatus = "timeout"     // the run's time budget ran out
	StagePartial     StageStatus = "partial"     // a budget (turns, cost) ran out inside it
)

// TeardownStatus is how a sandbox was released.
type TeardownStatus string

// Teardown statuses.
const (
	TeardownDeleted TeardownStatus = "deleted"
	TeardownKept    TeardownStatus = "kept" // attached: never deleted
	TeardownFailed  TeardownStatus = "failed"
	TeardownNone    TeardownStatus = "none" // there was no sandbox
)

// RubricStatus is a rubric evaluation's status (the TalkOps contract's words).
type RubricStatus string

// Rubric statuses. Scoring yields satisfied, failed or error; the revision loop adds
// needs_revision ("failed, and another agent pass is allowed").
const (
	RubricSatisfied     RubricStatus = "satisfied"
	RubricNeedsRevision RubricStatus = "needs_revision"
	RubricFailed        RubricStatus = "failed"
	RubricError         RubricStatus = "error"
)

// ItemStatus is one rubric item's outcome.
type ItemStatus string

// Item statuses.
const (
	StatusPass    ItemStatus = "pass"
	StatusFail    ItemStatus = "fail"
	StatusError   ItemStatus = "error"
	StatusSkipped ItemStatus = "skipped"
)

// VerdictFromRubric maps a rubric status to result.json's verdict: satisfied → pass;
// failed and needs_revision (no iterations left) → fail; error or anything else → error.
func VerdictFromRubric(status RubricStatus) string {
	switch status {
	case RubricSatisfied:
		return VerdictPass
	case RubricFailed, RubricNeedsRevision:
		return VerdictFail
	default:
		return VerdictError
	}
}

// CountItems tallies item statuses. A status it does not know counts as an error, never
// as a pass or a skip.
func CountItems(items []Item) Counts {
	var c Counts
	for _, it := range items {
		switch it.Status {
		case StatusPass:
			c.Pass++
		case StatusFail:
			c.Fail++
		case StatusSkipped:
			c.Skipped++
		default:
			c.Error++
		}
	}
	return c
}

// Result is the content of result.json.
type Result struct {
	Schema string `json:"schema"`
	Run    Run    `json:"run"`
	// Verdict is pass, fail or error. A run that has not finished yet says error with
	// Reason "run in progress", so a reader never mistakes an unfinished run for a pass.
	Verdict string `json:"verdict"`
	// Partial is set when a budget (turns, time, cost) ran out before the agent finished.
	Partial bool `json:"partial,omitempty"`
	// Interrupted names the signal that stopped the run, if any ("SIGINT", "SIGTERM").
	Interrupted string   `json:"interrupted,omitempty"`
	Score       *float64 `json:"score"`
	Reason      string   `json:"reason,omitempty"`
	ExitCode    int      `json:"exit_code"`
	// Advisory records that the run was started with --advisory, which maps exit 3 (no
	// verdict) and 124 (budget) to 0, so a later `talkops report --from --exit-code`
	// exits as the run did.
	Advisory bool `json:"advisory,omitempty"`

	Config   []ConfigValue `json:"config,omitempty"`
	Sandbox  *Sandbox      `json:"sandbox,omitempty"`
	Stages   []Stage       `json:"stages"`
	Sync     *Sync         `json:"sync,omitempty"`
	Setup    *Setup        `json:"setup,omitempty"`
	Agent    *Agent        `json:"agent,omitempty"`
	Rubric   *Rubric       `json:"rubric,omitempty"`
	Findings []Finding     `json:"findings,omitempty"`
	Errors   []Error       `json:"errors,omitempty"`
	Teardown *Teardown     `json:"teardown,omitempty"`
	// Verification says where the verdict's checks ran and what the agent changed, as
	// recorded on the host.
	Verification *Verification `json:"verification,omitempty"`
}

// Run identifies the run.
type Run struct {
	ID         string    `json:"id"`
	Version    string    `json:"version"`
	Commit     string    `json:"commit,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	DurationMS int64     `json:"duration_ms"`
	ProjectDir string    `json:"project_dir,omitempty"`
	ReportDir  string    `json:"report_dir,omitempty"`
	Prompt     string    `json:"prompt,omitempty"`
	CI         *CI       `json:"ci,omitempty"`
}

// CI describes the CI context the run was started in, when one was detected.
type CI struct {
	Provider string `json:"provider"` // github, gitlab, jenkins, local
	Repo     string `json:"repo,omitempty"`
	Event    string `json:"event,omitempty"`
	PR       int    `json:"pr,omitempty"`
	HeadSHA  string `json:"head_sha,omitempty"`
	Fork     bool   `json:"fork,omitempty"`
}

// ConfigValue is one resolved setting and where it came from.
type ConfigValue struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// Sandbox records which sandbox the run used.
type Sandbox struct {
	Provider string `json:"provider"`
	ID       string `json:"id,omitempty"`
	WorkDir  string `json:"work_dir,omitempty"`
	Attached bool   `json:"attached,omitempty"`
	Snapshot string `json:"snapshot,omitempty"`
}

// Stage records one pipeline stage.
type Stage struct {
	Name       StageName   `json:"name"`
	Status     StageStatus `json:"status"`
	StartedAt  time.Time   `json:"started_at"`
	DurationMS int64       `json:"duration_ms"`
	Error      string      `json:"error,omitempty"`
}

// Sync records the workspace upload.
type Sync struct {
	Files        int      `json:"files"`
	Dirs         int      `json:"dirs"`
	Bytes        int64    `json:"bytes"`      // file content before compression
	BytesSent    int64    `json:"bytes_sent"` // compressed tar bytes
	DurationMS   int64    `json:"duration_ms"`
	Ignored      int      `json:"ignored"`             // by .gitignore or the skip list
	TooLarge     []string `json:"too_large,omitempty"` // over the size limit
	Secrets      []string `json:"secrets,omitempty"`   // withheld for security reasons
	Symlinks     []string `json:"symlinks_outside,omitempty"`
	Disabled     bool     `json:"disabled,omitempty"`
	DisabledWhy  string   `json:"disabled_why,omitempty"`
	RemoteTarget string   `json:"remote_target,omitempty"`
	// LeftOut lists the first paths not sent (any reason); LeftOutBy counts all of them
	// by reason (skip_list, gitignore, exclude, secret, too_large, symlink_outside,
	// special).
	LeftOut   []LeftOut      `json:"left_out,omitempty"`
	LeftOutBy map[string]int `json:"left_out_by_reason,omitempty"`
	// GitTracked: the project is a git work tree, and every tracked file was sent
	// (secrets and exclude patterns aside); the skip list applied to untracked files.
	GitTracked bool `json:"git_tracked,omitempty"`
	// Mode is how the workspace reached the sandbox: "copy" (an archive) or "overlay"
	// (the project as the read-only lower layer of a copy-on-write workspace).
	Mode string `json:"mode,omitempty"`
	// ModeNote says why a sandbox that can layer the project got a copy instead.
	ModeNote string `json:"mode_note,omitempty"`
	// Caches are the host caches the sandbox saw; CacheNotes say why others were not
	// shared.
	Caches     []string `json:"caches,omitempty"`
	CacheNotes []string `json:"cache_notes,omitempty"`
}

// LeftOut is one path the workspace sync did not send.
type LeftOut struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Setup records the setup script.
type Setup struct {
	Script     string `json:"script"`
	ExitCode   int    `json:"exit_code"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	OutputTail string `json:"output_tail,omitempty"`
}

// Agent records the agent's part of the run.
type Agent struct {
	Model       string   `json:"model,omitempty"`
	Turns       int      `json:"turns"`
	FinalAnswer string   `json:"final_answer,omitempty"`
	StopReason  string   `json:"stop_reason,omitempty"` // done, max_turns, timeout, max_cost, stalled, error
	Usage       Usage    `json:"usage"`
	Denials     []Denial `json:"denials,omitempty"`
	ToolCalls   int      `json:"tool_calls"`
	Transcript  string   `json:"transcript,omitempty"` // path of transcript.jsonl
}

// Usage counts tokens and money.
type Usage struct {
	InputTokens       int64   `json:"input_tokens"`
	OutputTokens      int64   `json:"output_tokens"`
	CachedInputTokens int64   `json:"cached_input_tokens"`
	CostUSD           float64 `json:"cost_usd"`
}

// Denial is a tool call the approval policy refused.
type Denial struct {
	Tool   string `json:"tool"`
	Input  string `json:"input"`
	Reason string `json:"reason"`
	Turn   int    `json:"turn"`
}

// Rubric records the rubric and every iteration of its evaluation.
type Rubric struct {
	Name          string       `json:"name"`
	Description   string       `json:"description,omitempty"`
	Source        string       `json:"source"` // path, "@file" or "inline"
	SHA256        string       `json:"sha256"`
	Text          string       `json:"text,omitempty"` // the resolved rubric
	PassThreshold float64      `json:"pass_threshold"`
	Status        RubricStatus `json:"status"`
	Iterations    []Iteration  `json:"iterations"`
	Counts        Counts       `json:"counts"`
	// Items is the final iteration's items (a copy, for readers that want only those).
	Items []Item `json:"items"`
	// JudgeUsage is the tokens and cost of every judge call of every iteration; nil when
	// no judge model was called.
	JudgeUsage *Usage `json:"judge_usage,omitempty"`
}

// Iteration is one evaluation of the rubric.
type Iteration struct {
	N      int          `json:"n"`
	Items  []Item       `json:"items"`
	Score  float64      `json:"score"`
	Status RubricStatus `json:"status"`
}

// Counts tallies item statuses.
type Counts struct {
	Pass    int `json:"pass"`
	Fail    int `json:"fail"`
	Error   int `json:"error"`
	Skipped int `json:"skipped"`
}

// Item is one rubric entry's outcome: a deterministic check, a judged criterion, or an
// integrity rule.
type Item struct {
	ID         string     `json:"id"`
	Kind       string     `json:"kind"` // check, judge, integrity
	Title      string     `json:"title,omitempty"`
	Required   bool       `json:"required"`
	Weight     float64    `json:"weight"`
	Status     ItemStatus `json:"status"`
	Score      *float64   `json:"score"`
	Reason     string     `json:"reason,omitempty"`
	DurationMS int64      `json:"duration_ms"`
	Unstable   bool       `json:"unstable,omitempty"`
	Check      *Check     `json:"check,omitempty"`
	Judge      *Judge     `json:"judge,omitempty"`
	// Findings are the item's diagnostics: a check's parsed tool output, or the paths an
	// integrity item found changed.
	Findings []Finding `json:"findings,omitempty"`
}

// Check records a deterministic check's command.
type Check struct {
	Argv       []string `json:"argv"`
	ExitCode   *int     `json:"exit_code"`
	ExpectExit int      `json:"expect_exit"`
	TimedOut   bool     `json:"timed_out,omitempty"`
	StdoutTail string   `json:"stdout_tail,omitempty"`
	StderrTail string   `json:"stderr_tail,omitempty"`
}

// CommandLine is the check's argv as a shell command line (see ShellJoin).
func (c *Check) CommandLine() string { return ShellJoin(c.Argv) }

// ShellJoin renders argv as a shell command line, each argument quoted when the shell
// would otherwise split or expand it, so that it can be copied and run.
func ShellJoin(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '=' || r == ',' || r == '@' || r == '+' || r == '%' ||
				(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
		}) < 0 {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}

// Judge records a judged criterion's votes and the evidence it saw.
type Judge struct {
	Model    string     `json:"model"`
	Votes    []Vote     `json:"votes"`
	Evidence []Evidence `json:"evidence,omitempty"`
	// PromptVersion identifies the judge's prompt and answer schema ("judge/v1").
	PromptVersion string `json:"prompt_version,omitempty"`
	// Usage is this criterion's share of the judge calls that graded it (criteria graded
	// in one call split its usage evenly), so the items of a rubric sum to its total.
	Usage *Usage `json:"usage,omitempty"`
}

// Vote is one judge call's answer for one criterion.
type Vote struct {
	Verdict      string   `json:"verdict"` // pass, fail, insufficient_evidence, error
	Confidence   string   `json:"confidence,omitempty"`
	Gap          string   `json:"gap,omitempty"`
	EvidenceRefs []string `json:"evidence_refs,omitempty"`
	// Reasoning is the judge's short reasoning, written before its verdict.
	Reasoning string `json:"reasoning,omitempty"`
	// Error says why the vote is an error (the call failed, timed out or answered
	// outside the schema twice).
	Error string `json:"error,omitempty"`
}

// Evidence describes one numbered piece of evidence shown to the judge.
type Evidence struct {
	ID        string `json:"id"`
	Source    string `json:"source"`
	SHA256    string `json:"sha256"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Finding is one diagnostic: from the agent's report_finding tool, from a check's parsed
// output, or from the rubric. Lines are 1-based; EndLine is inclusive (0 = StartLine).
type Finding struct {
	Path        string `json:"path,omitempty"`
	StartLine   int    `json:"start_line,omitempty"`
	EndLine     int    `json:"end_line,omitempty"`
	StartColumn int    `json:"start_column,omitempty"`
	Severity    string `json:"severity"` // error, warning, notice
	Rule        string `json:"rule,omitempty"`
	Title       string `json:"title,omitempty"`
	Message     string `json:"message"`
	Source      string `json:"source"` // agent, check:<id>, rubric
	Fingerprint string `json:"fingerprint"`
	// EndColumn is 1-based and inclusive; only meaningful when the range is one line.
	EndColumn int `json:"end_column,omitempty"`
	// Snippet is the normalised source text the finding points at, when known. It feeds the
	// fingerprint (instead of the line number) so a finding keeps its identity when lines shift.
	Snippet string `json:"snippet,omitempty"`
	// InDiff is set when the range touches lines the change under review added or modified.
	InDiff bool `json:"in_diff,omitempty"`
}

// Finding severities.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
	SeverityNotice  = "notice"
)

// Error is an infrastructure error recorded against a stage.
type Error struct {
	Stage   StageName `json:"stage"`
	Message string    `json:"message"`
}

// Verification modes.
const (
	// VerifyClean runs checks and reads file evidence in a fresh sandbox holding the
	// baseline plus the agent's change set (protected paths at their baseline content).
	VerifyClean = "clean"
	// VerifyInPlace runs them in the agent's own sandbox.
	VerifyInPlace = "in-place"
)

// Verification records how the verdict was reached.
type Verification struct {
	// Mode is the mode that ran: clean or in-place.
	Mode string `json:"mode"`
	// Requested is the configured mode when another one ran (a provider that cannot make
	// a second sandbox falls back to in-place).
	Requested string `json:"requested,omitempty"`
	// Warning is set for in-place verification of an agent's work: the verdict trusts the
	// agent's sandbox.
	Warning string `json:"warning,omitempty"`
	// Baseline describes the host-side record of the workspace after the setup script.
	Baseline *WorkspaceRecord `json:"baseline,omitempty"`
	// Changes is the latest agent pass's change set against the baseline.
	Changes *ChangeSet `json:"changes,omitempty"`
	// CleanRooms are the sandboxes the checks ran in, one per evaluation.
	CleanRooms []CleanRoom `json:"clean_rooms,omitempty"`
}

// WorkspaceRecord is one host-side record of the workspace.
type WorkspaceRecord struct {
	Entries    int   `json:"entries"`
	Bytes      int64 `json:"bytes"`
	DurationMS int64 `json:"duration_ms"`
	// StoreRefusedBytes is content not kept on the host because of the store's cap.
	StoreRefusedBytes int64  `json:"store_refused_bytes,omitempty"`
	Warning           string `json:"warning,omitempty"`
}

// ChangeSet is every path the agent changed, computed on the host.
type ChangeSet struct {
	Pass    int          `json:"pass"`
	Added   int          `json:"added"`
	Changed int          `json:"modified"`
	Removed int          `json:"removed"`
	Other   int          `json:"mode_or_type"`
	Paths   []PathChange `json:"paths"`
	// Omitted counts paths beyond the listing cap (the counts above include them).
	Omitted int `json:"omitted,omitempty"`
}

// PathChange is one changed path with both sides.
type PathChange struct {
	Path   string `json:"path"`
	Change string `json:"change"` // added, modified, removed, mode, type
	Type   string `json:"type,omitempty"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Target string `json:"target,omitempty"`
	Mode   string `json:"mode,omitempty"`
	// BeforeSHA256 is the baseline's hash of a modified file.
	BeforeSHA256 string `json:"before_sha256,omitempty"`
	BeforeType   string `json:"before_type,omitempty"`
}

// CleanRoom is one fresh sandbox the checks ran in.
type CleanRoom struct {
	Iteration int    `json:"iteration"`
	SandboxID string `json:"sandbox_id,omitempty"`
	// Source is how it was filled: "provisioned" (sync and setup in a new sandbox) or
	// "materialized" (the host baseline written to a new directory).
	Source  string `json:"source"`
	Written int    `json:"written"`
	Removed int    `json:"removed"`
	// Kept are changed protected paths left at their baseline content.
	Kept       []string `json:"kept,omitempty"`
	NotApplied []string `json:"not_applied,omitempty"`
	DurationMS int64    `json:"duration_ms"`
	// Teardown is deleted, failed or none.
	Teardown TeardownStatus `json:"teardown"`
	Error    string         `json:"error,omitempty"`
}

// Teardown records how the sandbox was released.
type Teardown struct {
	Status     TeardownStatus `json:"status"`
	DurationMS int64          `json:"duration_ms"`
	Error      string         `json:"error,omitempty"`
	// Note says what the provider's backend was left to finish after the sandbox was
	// released (the docker engine still deleting a workspace volume's files).
	Note string `json:"note,omitempty"`
}

// Write stores r as dir/result.json atomically (temp file + rename), so a reader never sees
// a half-written file even if the process is killed mid-write. A result that does not
// follow the schema is not written; the error wraps ErrInvalid and names the fields.
func Write(dir string, r *Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create report dir: %w", err)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode result: %w", err)
	}
	if err := Validate(data); err != nil {
		return "", fmt.Errorf("write result: %w", err)
	}
	path := filepath.Join(dir, "result.json")
	tmp, err := os.CreateTemp(dir, ".result-*.json")
	if err != nil {
		return "", fmt.Errorf("write result: %w", err)
	}
	_, werr := tmp.Write(append(data, '\n'))
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write result %s: %w", path, firstErr(werr, cerr))
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write result %s: %w", path, err)
	}
	return path, nil
}

// Read loads a result.json and validates it against the embedded schema (see Validate).
func Read(path string) (*Result, error) {
	data, err := fileread.Read(path, MaxSize)
	if errors.Is(err, fileread.ErrTooLarge) || errors.Is(err, fileread.ErrNotRegular) {
		return nil, fmt.Errorf("read result: %w: %w", ErrInvalid, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	r, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("read result %s: %w", path, err)
	}
	return r, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
