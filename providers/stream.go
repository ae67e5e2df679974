package providers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// StreamExecer is implemented by sandboxes that can run a long-lived command with its
// stdin and stdout as streams, such as an MCP server speaking JSON-RPC over stdio. Callers
// probe for it (sb.(providers.StreamExecer)); a provider whose exec API only takes the
// whole stdin up front, or returns stdout only at the end, does not implement it.
type StreamExecer interface {
	// ExecStream starts cmd and returns at once. Cmd.Stdin and Cmd.Stdout are ignored (the
	// Stream carries them); Cmd.Stderr, when set, receives stderr as it is produced;
	// Cmd.Timeout, when set, bounds the whole life of the command. Cancelling ctx, Kill or
	// the sandbox's Close kill the command's whole process tree.
	ExecStream(ctx context.Context, cmd Cmd) (*Stream, error)
}

// Stream is a command started by ExecStream.
type Stream struct {
	// Stdin is the command's standard input; closing it sends EOF.
	Stdin io.WriteCloser
	// Stdout is the command's standard output; it ends (io.EOF) when the command exits.
	Stdout io.ReadCloser

	kill func()
	done chan struct{}
	res  ExecResult
	err  error
}

// streamCaptureLimit bounds what the underlying Exec keeps of each stream of a streaming
// command, which may run for the whole agent run: the streams themselves go to the caller.
const streamCaptureLimit = 64 << 10

// StreamOverExec implements ExecStream for a sandbox whose Exec streams: it reads
// Cmd.Stdin as the command consumes it and writes Cmd.Stdout as the command produces it
// (local, bwrap and docker do). exec is that sandbox's Exec.
func StreamOverExec(ctx context.Context, exec func(context.Context, Cmd) (ExecResult, error), cmd Cmd) (*Stream, error) {
	if len(cmd.Argv) == 0 || cmd.Argv[0] == "" {
		return nil, errors.New("exec stream: empty command (Cmd.Argv is empty)")
	}
	// An os.Pipe for stdin hands the read end to a local child directly, so no copying
	// goroutine is left waiting on it after the command exits.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("exec stream %s: %w", cmd.Argv[0], err)
	}
	outR, outW := io.Pipe()
	runCtx, cancel := context.WithCancel(ctx)
	s := &Stream{Stdin: inW, Stdout: outR, done: make(chan struct{})}
	var once sync.Once
	s.kill = func() {
		once.Do(func() {
			cancel()
			// Nobody reads a killed command's output: writes from the copy must not block.
			_ = outR.Close()
		})
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	if cmd.OutputLimit == 0 {
		cmd.OutputLimit = streamCaptureLimit
	}
	go func() {
		defer close(s.done)
		defer cancel()
		s.res, s.err = exec(runCtx, cmd)
		_ = inR.Close()
		_ = inW.Close()
		end := s.err
		if end == nil {
			end = io.EOF
		}
		_ = outW.CloseWithError(end)
	}()
	return s, nil
}

// Kill kills the command (its whole process tree) and returns at once. It is idempotent.
func (s *Stream) Kill() { s.kill() }

// Done is closed when the command has exited and Wait will not block.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Wait waits for the command to exit and returns what the sandbox's Exec returned: the
// exit code and a head and tail of its output, or the infrastructure error.
func (s *Stream) Wait() (ExecResult, error) {
	<-s.done
	return s.res, s.err
}
