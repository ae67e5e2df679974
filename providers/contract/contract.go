// Package contract holds the checks every sandbox provider passes, as ordinary code: the
// test suite (providers/providertest) runs them under `go test`, and `talkops provider
// test NAME` runs them against any configured provider with Check, without linking the
// testing package into the binary.
//
// The checks pin down the behaviour that the Sandbox documentation leaves to providers:
//
//   - A program that cannot be found (Cmd.Argv[0] not on PATH, or a missing absolute path)
//     is a result with ExitCode 127 and err == nil, as a shell reports it, never an error.
//     Every provider behaves the same whether it runs argv directly or through a shell.
//   - Arguments in Cmd.Argv reach the program verbatim: no shell expansion of "$", quotes
//     or ";" even by providers whose API takes a shell string.
//   - Cmd.Env overrides Spec.Env for the same key, for that command only.
//   - Cmd.Stdout and Cmd.Stderr receive the whole output, even when the captured copy in
//     the ExecResult is truncated by Cmd.OutputLimit.
//   - Cmd.Timeout gives TimedOut, ExitCode 124 and err == nil; cancelling ctx gives an
//     error wrapping context.Canceled. Both kill the whole process tree, including
//     background children, checked by a heartbeat file that must stop growing.
//   - Close kills running commands; Exec, Upload and Download after Close fail with
//     errors wrapping providers.ErrClosed; Close is idempotent and works on a fresh context
//     after the context the sandbox was created with was cancelled.
//   - Create with a cancelled context fails with an error wrapping context.Canceled and
//     leaves nothing behind.
//   - Attach returns providers.ErrNotSupported (accepted) or a working handle whose Close
//     does not delete the sandbox; an unknown id is providers.ErrNotFound.
//
// Commands in the checks need only a POSIX sh with busybox applets (sh, echo, printf, cat,
// sleep, mkdir, test, pwd), so providers with a busybox root filesystem pass.
package contract

import (
	"context"

	"github.com/talkops/talkops/providers"
)

// T is what a check needs of its runner: the subset of *testing.T the checks use.
// Fatal, Fatalf, Skip and Skipf end the check's goroutine (runtime.Goexit), as in testing.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Skip(args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
	// Context is cancelled just before the cleanup functions run.
	Context() context.Context
	// Run runs f as a named sub-check and waits for it; it reports whether f passed.
	Run(name string, f func(T)) bool
}

// Harness sets up one provider under check. The checks call the HarnessMaker once per
// case and Close when the case ends, after every sandbox of the case was closed.
type Harness interface {
	// NewProvider returns a provider under check; called once per case.
	NewProvider(ctx context.Context, t T) providers.Provider
	// Spec returns a Spec for Create. The checks fill in RunID, Labels and TTL when they
	// are empty and add their own Env keys (all prefixed PROVIDERTEST_).
	Spec(t T) providers.Spec
	// Alive lists the ids of sandboxes the provider still holds, for the NoLeaks check;
	// return nil, false if the harness cannot tell.
	Alive(ctx context.Context) (ids []string, ok bool)
	// Close releases what the harness set up.
	Close()
}

// HarnessMaker makes a Harness for one case. An error fails the case.
type HarnessMaker func(ctx context.Context, t T) (Harness, error)

// Case is one named check and the guarantee it checks.
type Case struct {
	Name      string
	Guarantee string
	fn        func(T, *suite)
}

// RunCase runs c with t, on a fresh harness from newHarness.
func (c Case) RunCase(t T, newHarness HarnessMaker) {
	s := newSuite(t, newHarness)
	c.fn(t, s)
}

// Cases returns every check in order.
func Cases() []Case { return append([]Case(nil), cases...) }

var cases = []Case{
	{"ProvisionClose", "a created sandbox runs commands and Close deletes it", testProvisionClose},
	{"CloseTwice", "Close is idempotent", testCloseTwice},
	{"CreateCancelled", "Create with a cancelled context fails with context.Canceled and leaves nothing", testCreateCancelled},
	{"ExecEcho", "arguments reach the program verbatim, output is captured", testExecEcho},
	{"ExecEmptyArgv", "an empty argv is an error", testExecEmptyArgv},
	{"StdoutStderrApart", "stdout and stderr are captured apart", testStdoutStderrApart},
	{"ExecNonZeroExit", "a non-zero exit is a result, not an error", testExecNonZeroExit},
	{"ExecEnvAndDir", "Cmd.Env and Cmd.Dir apply to one command only", testExecEnvAndDir},
	{"ExecStdin", "stdin reaches the command byte for byte", testExecStdin},
	{"ExecConcurrent", "commands run concurrently", testExecConcurrent},
	{"ExecCancel", "cancelling an Exec returns promptly and kills the process tree", testExecCancel},
	{"ExecTimeout", "Cmd.Timeout gives exit 124, TimedOut, and kills the process tree", testExecTimeout},
	{"OutputLimit", "captured output is capped head and tail, streamed output is whole", testOutputLimit},
	{"ExecNotFound", "a missing program is exit 127, not an error", testExecNotFound},
	{"UploadDownload", "a workspace archive uploads with modes intact and files download", testUploadDownload},
	{"DownloadMissing", "downloading a missing file wraps fs.ErrNotExist", testDownloadMissing},
	{"ExecAfterClose", "Exec after Close fails with ErrClosed", testExecAfterClose},
	{"UploadAfterClose", "Upload after Close fails with ErrClosed", testUploadAfterClose},
	{"DownloadAfterClose", "Download after Close fails with ErrClosed", testDownloadAfterClose},
	{"CloseKillsExec", "Close stops a running command", testCloseKillsExec},
	{"CloseAfterParentCancel", "Close works on a fresh context after the run's was cancelled", testCloseAfterParentCancel},
	{"AttachNeverDeletes", "an attached sandbox is never deleted by Close", testAttachNeverDeletes},
	{"AttachUnknown", "attaching an unknown id is ErrNotFound (or attach is ErrNotSupported)", testAttachUnknown},
	{"NoLeaks", "nothing is left alive after Close, whatever state the sandbox was in", testNoLeaks},
}
