// Package providertest is the contract suite every sandbox provider passes.
//
// A provider package adds one test:
//
//	func TestContract(t *testing.T) { providertest.Run(t, newHarness) }
//
// where newHarness builds a Harness: a provider under test plus whatever it needs (a fake
// server, a container engine, a temporary project directory). Run runs named subtests; each
// gets a fresh harness and a fresh provider, and every sandbox a subtest creates is closed
// through t.Cleanup on a context that is not cancelled, after which the harness's Alive
// list must no longer hold it.
//
// The suite pins down the behaviour that the Sandbox documentation leaves to providers:
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
// Commands in the suite need only a POSIX sh with busybox applets (sh, echo, printf, cat,
// sleep, mkdir, test, pwd), so providers with a busybox root filesystem pass.
package providertest

import (
	"context"
	"testing"

	"github.com/talkops/talkops/providers"
)

// Harness sets up one provider under test. Run calls the HarnessMaker once per subtest
// and Close when the subtest ends, after every sandbox of the subtest was closed.
type Harness interface {
	// NewProvider returns a provider under test; called once per subtest.
	NewProvider(ctx context.Context, t *testing.T) providers.Provider
	// Spec returns a Spec for Create (ProjectDir etc. set up by the harness in
	// t.TempDir()). The suite fills in RunID, Labels and TTL when they are empty and
	// adds its own Env keys (all prefixed PROVIDERTEST_).
	Spec(t *testing.T) providers.Spec
	// Alive lists the ids of sandboxes the provider still holds (engine or fake
	// ledger), for the NoLeaks check; return nil, false if the harness cannot tell.
	Alive(ctx context.Context) (ids []string, ok bool)
	// Close releases what the harness set up.
	Close()
}

// HarnessMaker makes a Harness for one subtest. An error fails the subtest.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

// Run runs the contract suite against the provider newHarness builds.
func Run(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSuite(t, newHarness)
			tc.fn(t, s)
		})
	}
}

var cases = []struct {
	name string
	fn   func(*testing.T, *suite)
}{
	{"ProvisionClose", testProvisionClose},
	{"CloseTwice", testCloseTwice},
	{"CreateCancelled", testCreateCancelled},
	{"ExecEcho", testExecEcho},
	{"ExecEmptyArgv", testExecEmptyArgv},
	{"StdoutStderrApart", testStdoutStderrApart},
	{"ExecNonZeroExit", testExecNonZeroExit},
	{"ExecEnvAndDir", testExecEnvAndDir},
	{"ExecStdin", testExecStdin},
	{"ExecConcurrent", testExecConcurrent},
	{"ExecCancel", testExecCancel},
	{"ExecTimeout", testExecTimeout},
	{"OutputLimit", testOutputLimit},
	{"ExecNotFound", testExecNotFound},
	{"UploadDownload", testUploadDownload},
	{"DownloadMissing", testDownloadMissing},
	{"ExecAfterClose", testExecAfterClose},
	{"UploadAfterClose", testUploadAfterClose},
	{"DownloadAfterClose", testDownloadAfterClose},
	{"CloseKillsExec", testCloseKillsExec},
	{"CloseAfterParentCancel", testCloseAfterParentCancel},
	{"AttachNeverDeletes", testAttachNeverDeletes},
	{"AttachUnknown", testAttachUnknown},
	{"NoLeaks", testNoLeaks},
}
