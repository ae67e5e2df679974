package judge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric/evidence"
)

// Vote verdicts (result.Vote.Verdict).
const (
	VotePass         = "pass"
	VoteFail         = "fail"
	VoteInsufficient = "insufficient_evidence"
	VoteError        = "error"
)

// verdict is one entry of a submit_verdicts call, validated against the schema.
type verdict struct {
	ID           string
	Reasoning    string
	EvidenceRefs []string
	Passed       bool
	Insufficient bool
	Gap          string
	Confidence   string
}

// rawVerdict decodes an entry; pointers tell a missing field from a zero value.
type rawVerdict struct {
	ID           *string   `json:"id"`
	Reasoning    *string   `json:"reasoning"`
	EvidenceRefs *[]string `json:"evidence_refs"`
	Passed       *bool     `json:"passed"`
	Insufficient *bool     `json:"insufficient_evidence"`
	Gap          *string   `json:"gap"`
	Confidence   *string   `json:"confidence"`
}

// parseAnswer reads the verdicts of one reply. Only submit_verdicts calls are read, never
// prose. Entries that follow the schema are returned by criterion id; everything that
// does not (no call, a malformed input, an unknown, duplicate or missing id, a cut reply)
// is a problem, phrased for the repair message.
func parseAnswer(resp model.Response, ids []string) (map[string]verdict, []string) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	got := map[string]verdict{}
	var problems []string
	calls := 0
	for _, tc := range resp.Message.ToolCalls {
		if tc.Name != ToolName {
			problems = append(problems, fmt.Sprintf("%q is not a tool; the only tool is %s", tc.Name, ToolName))
			continue
		}
		calls++
		entries, err := decodeInput(tc.Input)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for i, raw := range entries {
			v, err := decodeVerdict(raw)
			if err != nil {
				problems = append(problems, fmt.Sprintf("verdicts[%d]: %v", i, err))
				continue
			}
			switch {
			case !want[v.ID]:
				problems = append(problems, fmt.Sprintf("verdicts[%d]: %q is not a criterion id of this request", i, v.ID))
			case hasKey(got, v.ID):
				problems = append(problems, fmt.Sprintf("verdicts[%d]: a second verdict for %q", i, v.ID))
			default:
				got[v.ID] = v
			}
		}
	}
	if calls == 0 {
		switch resp.StopReason {
		case model.StopRefusal:
			problems = append(problems, "the reply was a refusal")
		case model.StopMaxTokens:
			problems = append(problems, "the reply was cut by the token limit")
		default:
			problems = append(problems, fmt.Sprintf("the reply did not call %s", ToolName))
		}
		return got, problems
	}
	if resp.StopReason == model.StopMaxTokens {
		problems = append(problems, "the reply was cut by the token limit")
	}
	var missing []string
	for _, id := range ids {
		if !hasKey(got, id) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "no verdict for "+strings.Join(missing, ", "))
	}
	return got, problems
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// decodeInput checks the top level of a submit_verdicts input: an object with exactly
// the key "verdicts", an array of objects.
func decodeInput(input json.RawMessage) ([]json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(input, &top); err != nil {
		return nil, fmt.Errorf("the %s input is not a JSON object: %s", ToolName, shortErr(err))
	}
	for k := range top {
		if k != "verdicts" {
			return nil, fmt.Errorf("the %s input has the unknown property %q (only \"verdicts\" is allowed)", ToolName, k)
		}
	}
	raw, ok := top["verdicts"]
	if !ok {
		return nil, fmt.Errorf("the %s input has no \"verdicts\" array", ToolName)
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("\"verdicts\" is not an array: %s", shortErr(err))
	}
	return entries, nil
}

func decodeVerdict(raw json.RawMessage) (verdict, error) {
	var r rawVerdict
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return verdict{}, fmt.Errorf("not a verdict object: %s", shortErr(err))
	}
	var missing []string
	for name, present := range map[string]bool{
		"id": r.ID != nil, "reasoning": r.Reasoning != nil, "evidence_refs": r.EvidenceRefs != nil,
		"passed": r.Passed != nil, "gap": r.Gap != nil, "confidence": r.Confidence != nil,
	} {
		if !present {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return verdict{}, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	switch *r.Confidence {
	case "low", "medium", "high":
	default:
		return verdict{}, fmt.Errorf("confidence %q is not low, medium or high", *r.Confidence)
	}
	v := verdict{ID: *r.ID, Reasoning: *r.Reasoning, EvidenceRefs: *r.EvidenceRefs, Passed: *r.Passed,
		Gap: *r.Gap, Confidence: *r.Confidence}
	if r.Insufficient != nil {
		v.Insufficient = *r.Insufficient
	}
	return v, nil
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

var refRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(refPattern) })

// checkRef validates one evidence reference against the evidence shown: the block must
// exist and a line range must lie inside it. support reports whether the block can
// support a pass (recorded evidence, not the task or the agent's claims).
func checkRef(ref string, b *evidence.Bundle) (support bool, problem string) {
	if !refRe().MatchString(ref) {
		return false, fmt.Sprintf("%q is not a reference like E3 or E3:L4-L9", ref)
	}
	id, lines, _ := strings.Cut(ref, ":")
	it, ok := b.Lookup(id)
	if !ok {
		return false, fmt.Sprintf("%s was not shown", id)
	}
	if lines != "" {
		from, to, hasTo := strings.Cut(strings.TrimPrefix(lines, "L"), "-")
		a, _ := strconv.Atoi(from)
		z := a
		if hasTo {
			z, _ = strconv.Atoi(strings.TrimPrefix(to, "L"))
		}
		if a < 1 || z < a || z > it.Lines {
			return false, fmt.Sprintf("%s has lines 1-%d, not %s", id, it.Lines, lines)
		}
	}
	return !it.Claims && !it.Context, ""
}

// decide turns a verdict into a vote, validating its evidence references in code: a pass
// that cites a block that was not shown, or cites no runner-recorded block at all, is
// insufficient evidence, never a pass.
func decide(v verdict, b *evidence.Bundle, redact func(string) string) result.Vote {
	vote := result.Vote{
		Confidence: v.Confidence,
		Gap:        redact(clip(v.Gap, 1000)),
		Reasoning:  redact(clip(v.Reasoning, 2000)),
	}
	supported := false
	var bad []string
	for i, ref := range v.EvidenceRefs {
		if i == 20 {
			bad = append(bad, fmt.Sprintf("%d more references ignored", len(v.EvidenceRefs)-20))
			break
		}
		vote.EvidenceRefs = append(vote.EvidenceRefs, clip(ref, 40))
		ok, problem := checkRef(ref, b)
		if problem != "" {
			bad = append(bad, problem)
		}
		supported = supported || ok
	}
	switch {
	case v.Insufficient:
		vote.Verdict = VoteInsufficient
	case !v.Passed:
		vote.Verdict = VoteFail
	case len(bad) > 0:
		vote.Verdict = VoteInsufficient
		vote.Gap = "the judge's pass cites evidence that was not shown (" + strings.Join(bad, "; ") + ")"
	case !supported:
		vote.Verdict = VoteInsufficient
		vote.Gap = "the judge's pass cites no evidence recorded by the runner (the task and the agent's claims do not count)"
	default:
		vote.Verdict = VotePass
		vote.Gap = ""
	}
	if vote.Verdict != VotePass && strings.TrimSpace(vote.Gap) == "" {
		vote.Gap = "the judge gave no gap"
	}
	return vote
}

// clip cuts s to at most n bytes at a character boundary.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
