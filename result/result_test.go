package result

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestVerdictFromRubric(t *testing.T) {
	t.Parallel()
	for status, want := range map[RubricStatus]string{
		RubricSatisfied: VerdictPass, RubricFailed: VerdictFail, RubricNeedsRevision: VerdictFail,
		RubricError: VerdictError, "": VerdictError, "grader_error": VerdictError,
	} {
		if got := VerdictFromRubric(status); got != want {
			t.Errorf("VerdictFromRubric(%q) = %q, want %q", status, got, want)
		}
	}
}

func TestCommandJSONKeepsMilliseconds(t *testing.T) {
	t.Parallel()
	c := Command{Pass: 2, Turn: 3, Command: "make", Argv: []string{"bash", "-c", "make"}, ExitCode: 1,
		Stdout: "o", Stderr: "e", Duration: 1500 * time.Millisecond, Truncated: true, OutputFile: "tool-outputs/3.txt"}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"pass":2,"turn":3,"command":"make","argv":["bash","-c","make"],"exit_code":1,"stdout":"o","stderr":"e",` +
		`"output_truncated":true,"output_file":"tool-outputs/3.txt","duration_ms":1500}`
	if string(data) != want {
		t.Errorf("json.Marshal(Command) =\n%s\nwant\n%s", data, want)
	}
	var back Command
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// TestAdvisoryKey: a run without --advisory writes exactly the JSON it always did (the
// key is left out), one with it says "advisory": true, and the schema accepts both.
func TestAdvisoryKey(t *testing.T) {
	t.Parallel()
	one := 1.0
	r := &Result{Schema: Schema, Verdict: VerdictError, Score: &one, ExitCode: 3, Stages: []Stage{},
		Run: Run{ID: "r1", Version: "0.3.0", StartedAt: time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)}}
	plain, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	const before = `{"schema":"talkops.result/v1","run":{"id":"r1","version":"0.3.0","started_at":"2026-07-01T00:00:00Z","duration_ms":0},"verdict":"error","score":1,"exit_code":3,"stages":[]}`
	if string(plain) != before {
		t.Errorf("without advisory:\n got %s\nwant %s", plain, before)
	}
	r.Advisory, r.ExitCode = true, 0
	advisory, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"exit_code":0,"advisory":true,"stages"`; !strings.Contains(string(advisory), want) {
		t.Errorf("with advisory: %s lacks %s", advisory, want)
	}
	for _, data := range [][]byte{plain, advisory} {
		got, err := Decode(data)
		if err != nil {
			t.Fatalf("Decode(%s) = %v", data, err)
		}
		if got.Advisory != strings.Contains(string(data), `"advisory":true`) {
			t.Errorf("Decode(%s).Advisory = %v", data, got.Advisory)
		}
	}
}
