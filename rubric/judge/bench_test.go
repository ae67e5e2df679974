package judge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/talkops/talkops/agent/model/modeltest"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/rubric/judge"
)

const fiveChecks = `
name = "five"
[[check]]
id  = "present"
run = ["test", "-f", "main.tf"]
[[check]]
id  = "declares"
run = ["grep", "-q", "resource", "main.tf"]
[[check]]
id  = "no-open-cidr"
run = "! grep -q '0.0.0.0/0' main.tf"
[[check]]
id  = "listing"
run = ["ls", "-la"]
[[check]]
id  = "shell"
run = "echo checked && exit 0"
`

// BenchmarkFiveCheckRubric measures one Evaluate of a 5-check rubric on the local
// provider: the checks alone, and with two judged criteria (diff and commands evidence,
// a real baseline diff, one call to a fake model over loopback HTTP).
func BenchmarkFiveCheckRubric(b *testing.B) {
	for _, withJudge := range []bool{false, true} {
		name := "checks-only"
		src := fiveChecks
		if withJudge {
			name = "checks+2-criteria"
			src += `
[[criterion]]
id = "fixed"
question = "Does the diff remove ingress from 0.0.0.0/0?"
[[criterion]]
id = "scoped"
question = "Does the change touch only main.tf?"
`
		}
		b.Run(name, func(b *testing.B) {
			sb := newLocal(b, map[string]string{"main.tf": openTF, "README.md": "x\n"})
			base := takeBaseline(b, sb)
			sh(b, sb, `sed -i 's|0.0.0.0/0|10.0.0.0/8|' main.tf`)
			r := parseRubric(b, src)
			ev := &rubric.Evaluator{Rubric: r, Sandbox: sb, MaxIterations: 1, Workspace: base,
				Agent: func(int) rubric.AgentRecord { return typicalRecord(5) }}
			if withJudge {
				srv := modeltest.NewServerFunc(func(c modeltest.Call) modeltest.Step {
					return answer(pass("fixed", "E3"), pass("scoped", "E2"))
				}, modeltest.WithAPIKey(apiKey))
				defer srv.Close()
				j, err := judge.New(judge.Options{Model: newModel(b, formats[0], srv)})
				if err != nil {
					b.Fatal(err)
				}
				ev.Judge = j
			}
			for b.Loop() {
				it := ev.Evaluate(context.Background(), 1)
				if it.Status != result.RubricSatisfied {
					b.Fatalf("status %s: %+v", it.Status, it.Items)
				}
			}
		})
	}
}

// typicalRecord is an agent pass of n commands whose outputs range from a line to a long
// plan.
func typicalRecord(n int) rubric.AgentRecord {
	rec := rubric.AgentRecord{Prompt: "Run terraform validate and plan, fix open SSH ingress, and keep the change minimal.",
		FinalMessage: "Done: validate passes and the ingress is restricted."}
	for i := range n {
		out := strings.Repeat(fmt.Sprintf("  # aws_security_group_rule.r%d will be updated in-place\n", i), 1+(i*i*37)%700)
		rec.Commands = append(rec.Commands, result.Command{Pass: 1, Command: fmt.Sprintf("terraform plan -target=r%d", i), Stdout: out})
	}
	return rec
}

// BenchmarkJudgeTokens reports the judge's request size for a typical free-text rubric
// (3 criteria, graded in one call) after an agent pass of 25 commands (about 600 KB of
// output) and a diff of 8 files (one of them a 200 KB generated file), at several
// evidence budgets. Tokens are the fake server's estimate (request bytes / 4).
func BenchmarkJudgeTokens(b *testing.B) {
	for _, budget := range []int{20_000, rubric.DefaultMaxEvidenceBytes, 10_000_000} {
		b.Run(fmt.Sprintf("budget=%d", budget), func(b *testing.B) {
			files := map[string]string{"gen/schema.json": strings.Repeat(`{"k": "v"},`+"\n", 100)}
			for i := range 7 {
				files[fmt.Sprintf("infra/m%d.tf", i)] = strings.Repeat(fmt.Sprintf("resource \"null_resource\" \"r%d\" {}\n", i), 40)
			}
			sb := newLocal(b, files)
			base := takeBaseline(b, sb)
			sh(b, sb, `for f in infra/*.tf; do sed -i 's/null_resource/terraform_data/' "$f"; done
i=0; while [ $i -lt 18000 ]; do echo "{\"k\": \"w$i\"},"; i=$((i+1)); done > gen/schema.json`)
			r := parseText(b, "- terraform validate passes\n- no security group allows 0.0.0.0/0 on port 22\n- only files under infra/ change")
			rec := typicalRecord(25)
			var bodies, calls int64
			srv := modeltest.NewServerFunc(func(c modeltest.Call) modeltest.Step {
				return answer(pass("criterion-1", "E2"), pass("criterion-2", "E2"), pass("criterion-3", "E2"))
			}, modeltest.WithAPIKey(apiKey))
			defer srv.Close()
			j, err := judge.New(judge.Options{Model: newModel(b, formats[0], srv), MaxEvidenceBytes: budget})
			if err != nil {
				b.Fatal(err)
			}
			var evidenceBytes int
			for b.Loop() {
				items, err := j.Grade(context.Background(), rubric.JudgeRequest{Iteration: 1, Rubric: r, Criteria: r.Criteria,
					Agent: rec, Sandbox: sb, Workspace: base})
				if err != nil {
					b.Fatal(err)
				}
				evidenceBytes = 0
				for _, e := range items[0].Judge.Evidence {
					evidenceBytes += e.Bytes
				}
			}
			for _, c := range srv.Calls() {
				bodies += int64(len(c.Body))
				calls++
			}
			b.ReportMetric(float64(bodies)/4/float64(calls)/float64(len(r.Criteria)), "in-tokens/criterion")
			b.ReportMetric(float64(evidenceBytes), "evidence-bytes/call")
		})
	}
}
