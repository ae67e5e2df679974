package main

import (
	"errors"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/runner"
)

func usagef(format string, args ...any) error { return runner.Usagef(format, args...) }

func usageErr(err error) error { return &runner.UsageError{Err: err} }

// isUsage reports errors that mean "the user asked for something invalid" (exit 2).
func isUsage(err error) bool {
	var ue *runner.UsageError
	var re *rubric.Error
	return errors.As(err, &ue) || errors.As(err, &re) || errors.Is(err, providers.ErrConfig)
}
