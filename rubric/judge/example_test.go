package judge_test

import (
	"context"
	"fmt"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/model/modeltest"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/rubric/judge"
)

func ExampleJudge_Grade() {
	// A fake Anthropic endpoint whose model passes the criterion, citing the command block.
	srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{
		answer(pass("criterion-1", "E3")),
	}})
	defer srv.Close()
	m, err := model.New("anthropic:claude-sonnet-4-5", srv.URL, func(string) string { return "sk-example" })
	if err != nil {
		fmt.Println(err)
		return
	}
	j, err := judge.New(judge.Options{Model: m})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := rubric.Parse("terraform validate passes", ".")
	if err != nil {
		fmt.Println(err)
		return
	}
	items, err := j.Grade(context.Background(), rubric.JudgeRequest{
		Iteration: 1, Rubric: r, Criteria: r.Criteria,
		Agent: rubric.AgentRecord{
			Prompt:   "Run terraform validate.",
			Commands: []result.Command{{Pass: 1, Command: "terraform validate", Stdout: "Success! The configuration is valid.\n"}},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range items {
		fmt.Println(it.ID, it.Status, it.Judge.Model, it.Judge.Votes[0].EvidenceRefs)
		for _, e := range it.Judge.Evidence {
			fmt.Println(" ", e.ID, e.Source)
		}
	}
	// Output:
	// criterion-1 pass anthropic:claude-sonnet-4-5 [E3]
	//   E1 task
	//   E2 diff
	//   E3 command:1
}
