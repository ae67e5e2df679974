package runner

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/talkops/talkops/result"
)

// Exit codes, the one table (README "Exit codes").
const (
	ExitPass    = 0   // the agent finished and the rubric (if any) is satisfied
	ExitFail    = 1   // the rubric is not satisfied
	ExitUsage   = 2   // bad flag, config, rubric file, missing setup script: nothing provisioned
	ExitError   = 3   // no verdict could be reached: sandbox, model API, judge, setup, teardown
	ExitBudget  = 124 // max turns, time or cost ran out; a partial result is still written
	ExitSIGINT  = 130 // interrupted by SIGINT, after teardown
	ExitSIGTERM = 143 // interrupted by SIGTERM, after teardown
)

// AdvisoryExitCode is code under --advisory: no verdict (3) and a budget (124) become 0,
// so infrastructure trouble does not fail the job; a fail, a usage error or a signal keeps
// its code, and without advisory every code is kept. The run and `talkops report --from`
// (from result.json's advisory) both map through here.
func AdvisoryExitCode(code int, advisory bool) int {
	if advisory && (code == ExitError || code == ExitBudget) {
		return ExitPass
	}
	return code
}

// UsageError is a problem with what the user asked for, found before anything was
// provisioned. main maps it to ExitUsage.
type UsageError struct {
	Err error
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef builds a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// Interrupted is the cancellation cause main attaches to the run's context when a signal
// arrives, so the runner can tell an interrupt from a timeout.
type Interrupted struct {
	Signal os.Signal
}

func (e *Interrupted) Error() string { return "interrupted by " + SignalName(e.Signal) }

// ExitCode is the conventional 128+n code for the signal.
func (e *Interrupted) ExitCode() int {
	if e.Signal == syscall.SIGTERM {
		return ExitSIGTERM
	}
	return ExitSIGINT
}

// SignalName is "SIGINT" or "SIGTERM" (or the signal's own name for others).
func SignalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	if s == nil {
		return "signal"
	}
	return s.String()
}

// StageError is an infrastructure failure in one stage of the pipeline.
type StageError struct {
	Stage result.StageName
	Err   error
}

func (e *StageError) Error() string { return string(e.Stage) + ": " + e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// interruptedBy returns the Interrupted cause of err, if any.
func interruptedBy(err error) (*Interrupted, bool) {
	var in *Interrupted
	ok := errors.As(err, &in)
	return in, ok
}
