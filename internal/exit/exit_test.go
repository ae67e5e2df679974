package exit_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/internal/exit"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/runner"
)

func TestCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		err      error
		code     int
		reported bool
	}{
		{"nil", nil, runner.ExitPass, false},
		{"chosen by a command", exit.Reported(runner.ExitFail, errors.New("rubric failed")), runner.ExitFail, true},
		{"wrapped choice", fmt.Errorf("publish: %w", &exit.Error{Code: 124}), 124, false},
		{"usage", runner.Usagef("--run-id %q: bad", "x y"), runner.ExitUsage, false},
		{"config", &config.Error{Msg: "unknown key"}, runner.ExitUsage, false},
		{"rubric", fmt.Errorf("rubric: %w", &rubric.Error{Msg: "empty"}), runner.ExitUsage, false},
		{"provider setting", fmt.Errorf("daytona: %w", providers.ErrConfig), runner.ExitUsage, false},
		{"anything else", errors.New("docker engine unreachable"), runner.ExitError, false},
	}
	for _, tc := range tests {
		if got := exit.Code(tc.err); got != tc.code {
			t.Errorf("%s: Code = %d, want %d", tc.name, got, tc.code)
		}
		if got := exit.IsReported(tc.err); got != tc.reported {
			t.Errorf("%s: IsReported = %v, want %v", tc.name, got, tc.reported)
		}
	}
}
