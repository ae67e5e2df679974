// Command talkops runs an AI DevOps agent headless in an ephemeral sandbox, scores the
// outcome against a rubric, publishes the verdict and always tears the sandbox down.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/talkops/talkops/internal/exit"
	"github.com/talkops/talkops/providers/builtin"
	"github.com/talkops/talkops/providers/bwrap"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/runner"
)

// removalsWait bounds the wait at exit for background removals (see bwrap.WaitRemovals).
const removalsWait = 30 * time.Second

func main() {
	os.Exit(runProcess(builtin.Providers().With(testProviders(os.Getenv))))
}

// runProcess runs the app on this process's arguments, I/O, environment, working
// directory and signals, and returns the exit code.
func runProcess(registry builtin.Registry) int {
	// The CLI's only children are its sandbox provider's commands: orphans a local command
	// detached are reparented here, where the sandbox's Close finds and kills them.
	// Failing to is no reason to stop (the kernel may be too old).
	_ = local.BecomeSubreaper()
	ctx, cancel := context.WithCancelCause(context.Background())
	force := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		// First signal: stop the run and tear down gracefully. Second: stop waiting.
		s := <-sigs
		cancel(&runner.Interrupted{Signal: s})
		<-sigs
		close(force)
	}()
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "talkops: working directory:", err)
		return 3
	}
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, workDir: wd,
		providers: registry, force: force}
	err = a.run(ctx, os.Args[1:])
	if err != nil && !exit.IsReported(err) {
		fmt.Fprintln(os.Stderr, "talkops:", err)
	}
	if ctx.Err() == nil {
		// bwrap teardown leaves a layered workspace's link tree to remove in the
		// background. After a signal it is left to the next sweep instead, so that the
		// exit stays inside the cancel window.
		bwrap.WaitRemovals(removalsWait)
	}
	return exit.Code(err)
}
