// Command talkops runs an AI DevOps agent headless in an ephemeral sandbox, scores the
// outcome against a rubric, publishes the verdict and always tears the sandbox down.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/runner"
)

func main() {
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
	err := run(withForce(ctx, force), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	code := exitCode(err)
	if err != nil && !isReported(err) {
		fmt.Fprintln(os.Stderr, "talkops:", err)
	}
	os.Exit(code)
}
