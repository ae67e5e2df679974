package result

import (
	"encoding/json"
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
