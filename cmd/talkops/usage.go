package main

import (
	"context"
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

type forceKey struct{}

// withForce attaches the channel main closes on a second signal.
func withForce(ctx context.Context, force <-chan struct{}) context.Context {
	return context.WithValue(ctx, forceKey{}, force)
}

func forceFrom(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(forceKey{}).(<-chan struct{})
	return ch
}
