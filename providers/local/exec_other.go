//go:build !unix

package local

import (
	"context"
	"fmt"
	"runtime"

	"github.com/talkops/talkops/providers"
)

// Exec is not supported off Unix: the provider relies on process groups to kill a
// command's whole process tree.
func (s *sandbox) Exec(ctx context.Context, cmd providers.Cmd) (providers.ExecResult, error) {
	return providers.ExecResult{}, fmt.Errorf("local: exec on %s: %w", runtime.GOOS, providers.ErrNotSupported)
}

func killGroup(int) {}

func groupExists(int) bool { return false }

func groupRunning(int) bool { return false }
