package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/talkops/talkops/internal/fileread"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/runner"
)

// DefaultCheckName names the check run report --from creates unless the workflow names
// another: never the artifact, which a fork controls.
const DefaultCheckName = "talkops"

// readArtifact reads result.json from an artifact strictly: a regular file of at most
// result.MaxSize bytes that follows the schema and has no key talkops does not write.
func readArtifact(path string) (*result.Result, error) {
	data, err := fileread.Read(path, result.MaxSize)
	if errors.Is(err, fileread.ErrTooLarge) || errors.Is(err, fileread.ErrNotRegular) {
		return nil, fmt.Errorf("read result: %w: %w", result.ErrInvalid, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	r, err := result.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("read result %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(new(result.Result)); err != nil {
		return nil, fmt.Errorf("read result %s: %w: %w", path, result.ErrInvalid, err)
	}
	return r, nil
}

// verdictRank orders verdicts from best to worst; an unknown word is the worst.
func verdictRank(v string) int {
	switch v {
	case result.VerdictPass:
		return 0
	case result.VerdictFail:
		return 1
	}
	return 2
}

// Recompute replaces what a result.json from an artifact claims — verdict, score, rubric
// status and counts, exit code — with what its items and the rubric's threshold say. The
// artifact's other claims can only make the outcome worse: an interrupt, a budget or an
// infrastructure error keeps its verdict, and nothing becomes a pass that its items do
// not pass.
func Recompute(r *result.Result) {
	claimed := r.Verdict
	verdict := claimed
	if verdictRank(verdict) == 2 {
		verdict = result.VerdictError
	}
	if rb := r.Rubric; rb != nil {
		score, status := rubric.Score(rb.Items, rb.PassThreshold)
		rb.Status, rb.Counts, r.Score = status, result.CountItems(rb.Items), &score
		if fromItems := result.VerdictFromRubric(status); verdictRank(fromItems) > verdictRank(verdict) {
			verdict = fromItems
		}
	}
	if r.Interrupted != "" {
		verdict = result.VerdictError
	}
	if r.Partial && verdict == result.VerdictPass {
		verdict = result.VerdictFail
	}
	if verdict != claimed {
		r.Reason = fmt.Sprintf("recomputed from the rubric's items: result.json claimed %q", claimed)
	}
	r.Verdict = verdict
	switch {
	case r.Interrupted == "SIGINT":
		r.ExitCode = runner.ExitSIGINT
	case r.Interrupted == "SIGTERM":
		r.ExitCode = runner.ExitSIGTERM
	case r.Interrupted != "":
		r.ExitCode = runner.ExitError
	case r.Partial:
		r.ExitCode = runner.ExitBudget
	case verdict == result.VerdictPass:
		r.ExitCode = runner.ExitPass
	case verdict == result.VerdictFail:
		r.ExitCode = runner.ExitFail
	default:
		r.ExitCode = runner.ExitError
	}
}
