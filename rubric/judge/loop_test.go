package judge_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/rubric/judge"
)

const ingressRubric = `
name = "ingress"

[[check]]
id  = "tf-present"
run = "test -f main.tf"

[[criterion]]
id       = "no-open-ingress"
title    = "No ingress from 0.0.0.0/0"
question = "Does the change remove security group ingress from 0.0.0.0/0 in main.tf?"
evidence = ["diff", "commands"]
pass_examples = ["the diff removes cidr = \"0.0.0.0/0\" from main.tf"]
fail_examples = ["main.tf still has cidr = \"0.0.0.0/0\""]
`

const openTF = "resource \"aws_security_group_rule\" \"ssh\" {\n  type = \"ingress\"\n  cidr = \"0.0.0.0/0\"\n}\n"

// ingressJudge passes when the diff of main.tf removes the open CIDR and adds none.
func ingressJudge(t *testing.T) func(p prompt, id string) verdict {
	return func(p prompt, id string) verdict {
		b, ok := p.find("diff:main.tf")
		if ok && strings.Contains(b.Content, `-  cidr = "0.0.0.0/0"`) && !strings.Contains(b.Content, `+  cidr = "0.0.0.0/0"`) {
			return pass(id, b.ID)
		}
		d, _ := p.find("diff")
		return fail(id, "main.tf still allows ingress from 0.0.0.0/0", d.ID)
	}
}

// agentLog is what the runner records of the agent's passes.
type agentLog struct {
	mu  sync.Mutex
	rec rubric.AgentRecord
}

func (a *agentLog) ran(pass int, cmd, stdout string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rec.Commands = append(a.rec.Commands, result.Command{Pass: pass, Command: cmd, Stdout: stdout})
}

func (a *agentLog) record(int) rubric.AgentRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.rec
	r.Commands = append([]result.Command(nil), a.rec.Commands...)
	return r
}

// TestRevisionLoop drives the Evaluator as the runner does: a baseline after setup, an
// agent pass that does not fix the problem (needs_revision, with the judge's gap in the
// revision message), a scripted revision that does (satisfied on iteration 2).
func TestRevisionLoop(t *testing.T) {
	t.Parallel()
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			sb := newLocal(t, map[string]string{"main.tf": openTF, "README.md": "infra\n"})
			base := takeBaseline(t, sb)
			j, srv := newJudge(t, f, honest(t, ingressJudge(t)), judge.Options{})
			r := parseRubric(t, ingressRubric)
			log := &agentLog{rec: rubric.AgentRecord{Prompt: "Remove the open SSH ingress."}}
			ev := &rubric.Evaluator{Rubric: r, Sandbox: sb, Judge: j, MaxIterations: 3, Agent: log.record, Workspace: base}

			// Pass 1: the agent only edits the README.
			sh(t, sb, "echo 'looked at it' >> README.md")
			log.ran(1, "cat main.tf", openTF)
			it1 := ev.Evaluate(t.Context(), 1)
			if it1.Status != result.RubricNeedsRevision {
				t.Fatalf("iteration 1 = %s, want needs_revision: %+v", it1.Status, it1.Items)
			}
			msg := rubric.RevisionMessage(r, it1)
			if !strings.Contains(msg, "main.tf still allows ingress from 0.0.0.0/0") {
				t.Errorf("revision message lacks the judge's gap:\n%s", msg)
			}

			// Pass 2: the scripted revision fixes main.tf.
			sh(t, sb, `sed -i 's|0.0.0.0/0|10.0.0.0/8|' main.tf`)
			log.ran(2, "sed -i 's|0.0.0.0/0|10.0.0.0/8|' main.tf", "")
			it2 := ev.Evaluate(t.Context(), 2)
			if it2.Status != result.RubricSatisfied {
				t.Fatalf("iteration 2 = %s, want satisfied: %+v", it2.Status, it2.Items)
			}
			rec := r.Record([]result.Iteration{it1, it2})
			if rec.Status != result.RubricSatisfied || result.VerdictFromRubric(rec.Status) != result.VerdictPass {
				t.Errorf("Record status = %s", rec.Status)
			}
			if rec.JudgeUsage == nil || rec.JudgeUsage.InputTokens == 0 {
				t.Errorf("Record JudgeUsage = %+v, want the judge calls' tokens", rec.JudgeUsage)
			}

			calls := srv.Calls()
			if len(calls) != 2 {
				t.Fatalf("%d judge calls, want one per iteration", len(calls))
			}
			// Evidence is gathered per iteration: the second call sees the fix and the
			// second pass's command; the README edit of pass 1 is in both diffs.
			p1, p2 := parsePrompt(t, calls[0]), parsePrompt(t, calls[1])
			if _, ok := p1.find("diff:main.tf"); ok {
				t.Error("iteration 1 shows a diff of main.tf, which was not changed yet")
			}
			for _, p := range []prompt{p1, p2} {
				if b, ok := p.find("diff:README.md"); !ok || !strings.Contains(b.Content, "+looked at it") {
					t.Errorf("README.md diff missing or wrong: %q", b.Content)
				}
			}
			if b, ok := p2.find("command:2"); !ok || !strings.Contains(b.Content, "agent pass 2") {
				t.Errorf("iteration 2 lacks the second pass's command: %q", b.Content)
			}
			if !strings.Contains(p2.System, `Passes, for example: the diff removes cidr = "0.0.0.0/0" from main.tf`) {
				t.Errorf("the criterion's examples are not in the system prompt:\n%s", p2.System)
			}
			var kinds []string
			for _, item := range it2.Items {
				kinds = append(kinds, item.Kind+":"+item.ID+"="+string(item.Status))
			}
			if diff := cmp.Diff([]string{"check:tf-present=pass", "judge:no-open-ingress=pass"}, kinds); diff != "" {
				t.Errorf("iteration 2 items (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMaxIterations: the agent never fixes the problem; the last allowed iteration is a
// failure, not another revision.
func TestMaxIterations(t *testing.T) {
	t.Parallel()
	sb := newLocal(t, map[string]string{"main.tf": openTF})
	base := takeBaseline(t, sb)
	j, srv := newJudge(t, formats[0], honest(t, ingressJudge(t)), judge.Options{})
	r := parseRubric(t, ingressRubric)
	log := &agentLog{rec: rubric.AgentRecord{Prompt: "Remove the open SSH ingress."}}
	ev := &rubric.Evaluator{Rubric: r, Sandbox: sb, Judge: j, MaxIterations: 2, Agent: log.record, Workspace: base}
	var iters []result.Iteration
	for n := 1; ; n++ {
		log.ran(n, "terraform fmt", "")
		it := ev.Evaluate(t.Context(), n)
		iters = append(iters, it)
		if it.Status != result.RubricNeedsRevision {
			break
		}
		if n > 5 {
			t.Fatal("the loop does not end")
		}
	}
	var got []result.RubricStatus
	for _, it := range iters {
		got = append(got, it.Status)
	}
	if diff := cmp.Diff([]result.RubricStatus{result.RubricNeedsRevision, result.RubricFailed}, got); diff != "" {
		t.Errorf("iteration statuses (-want +got):\n%s", diff)
	}
	rec := r.Record(iters)
	if result.VerdictFromRubric(rec.Status) != result.VerdictFail {
		t.Errorf("verdict = %s, want fail", result.VerdictFromRubric(rec.Status))
	}
	if len(srv.Calls()) != 2 {
		t.Errorf("%d judge calls, want 2", len(srv.Calls()))
	}
}

// TestJudgeErrorIsNeverAPass: a judge that keeps failing makes the rubric an error.
func TestJudgeErrorIsNeverAPass(t *testing.T) {
	t.Parallel()
	sb := newLocal(t, map[string]string{"main.tf": openTF})
	j, _ := newJudge(t, formats[1], steps(answer(pass("no-open-ingress", "E99"))), judge.Options{})
	r := parseRubric(t, strings.Replace(ingressRubric, `evidence = ["diff", "commands"]`, "evidence = [\"diff\", \"commands\"]\nrequired = false", 1))
	ev := &rubric.Evaluator{Rubric: r, Sandbox: sb, Judge: j, MaxIterations: 1}
	it := ev.Evaluate(t.Context(), 1)
	if it.Status != result.RubricError {
		t.Errorf("status = %s, want error (an unsupported pass of an optional criterion): %+v", it.Status, it.Items)
	}
}
