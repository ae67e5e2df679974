package result

import "testing"

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
