// Package exit maps what the talkops program returns to its exit code (the table is
// runner's): a command that chose its code says so with an *Error, a mistake in what
// the user asked for is ExitUsage, anything else ExitError.
package exit

import (
	"errors"
	"fmt"

	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/runner"
)

// Error carries an exit code chosen by a command.
type Error struct {
	Code int
	Err  error
	// Reported: the message was already printed (as part of the command's output).
	Reported bool
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Reported is a code whose message the command already printed.
func Reported(code int, err error) error { return &Error{Code: code, Err: err, Reported: true} }

// Code is the exit code for err.
func Code(err error) int {
	var ee *Error
	switch {
	case err == nil:
		return runner.ExitPass
	case errors.As(err, &ee):
		return ee.Code
	case IsUsage(err):
		return runner.ExitUsage
	}
	return runner.ExitError
}

// IsReported reports whether err's message was already printed.
func IsReported(err error) bool {
	var ee *Error
	return errors.As(err, &ee) && ee.Reported
}

// IsUsage reports errors that mean "the user asked for something invalid": a bad flag,
// configuration, rubric or provider setting.
func IsUsage(err error) bool {
	var ue *runner.UsageError
	var re *rubric.Error
	var ce *config.Error
	return errors.As(err, &ue) || errors.As(err, &re) || errors.As(err, &ce) || errors.Is(err, providers.ErrConfig)
}
