package rubric_test

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
)

// Free text becomes one judged criterion per line or bullet.
func ExampleParse() {
	r, err := rubric.Parse("The change must:\n- pass tofu validate\n- open no ingress to 0.0.0.0/0", ".")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range r.Criteria {
		fmt.Printf("%s: %s\n", c.ID, c.Question)
	}
	// Output:
	// criterion-1: The change must: pass tofu validate
	// criterion-2: The change must: open no ingress to 0.0.0.0/0
}

// Every problem with the rubric is a *rubric.Error (the caller exits 2) that names the
// file, line and column and says what would be valid.
func ExampleParse_error() {
	_, err := rubric.Parse("testdata/bad/timeout.toml", ".")
	fmt.Println(err)
	var rerr *rubric.Error
	fmt.Println(errors.As(err, &rerr), rerr.Line, rerr.Col)

	_, err = rubric.Parse("@testdata/missing.md", ".")
	fmt.Println(errors.Is(err, fs.ErrNotExist))
	// Output:
	// testdata/bad/timeout.toml:4:11: [[check]] "fmt": timeout "5 minutes" is not a duration; write it like "90s", "5m" or "1h30m"
	// true 4 11
	// true
}

// Required items gate; the rest are weighed against pass_threshold.
func ExampleScore() {
	one := 1.0
	items := []result.Item{
		{ID: "validate", Kind: "check", Required: true, Weight: 1, Status: "pass", Score: &one},
		{ID: "fmt", Kind: "check", Weight: 1, Status: "fail"},
		{ID: "docs", Kind: "judge", Weight: 3, Status: "pass"},
	}
	score, status := rubric.Score(items, 0.7)
	fmt.Printf("%.2f %s %s\n", score, status, result.VerdictFromRubric(status))
	// Output: 0.80 satisfied pass
}
