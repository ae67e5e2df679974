package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/internal/fileread"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/result"
)

// SetupScript is a script read on the host before anything is provisioned.
type SetupScript struct {
	Path    string // as the user gave it, for messages
	Content []byte
	Mode    os.FileMode
	Timeout time.Duration // 0 = bounded only by the run
}

// LoadSetupScript reads and validates the setup script. A missing or unreadable file is a
// UsageError, so nothing gets provisioned for a run that cannot succeed.
func LoadSetupScript(p string) (*SetupScript, error) {
	data, err := fileread.Read(p, MaxSetupScriptBytes)
	if err != nil {
		return nil, Usagef("setup script: %w", err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, Usagef("setup script %s: %w", p, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, Usagef("setup script %s is empty", p)
	}
	return &SetupScript{Path: p, Content: data, Mode: fi.Mode().Perm()}, nil
}

// MaxSetupScriptBytes caps the setup script read into memory and uploaded.
const MaxSetupScriptBytes = 1 << 20

// setupDir is where the script is uploaded, relative to the sandbox working directory.
// .talkops is never synced and is in every provider's skip list.
const setupDir = ".talkops/tmp"

// runScript is the sh wrapper: bash when the sandbox has it (scripts expect bash), sh
// with a warning otherwise. The script path is an argument, never interpolated.
const runScript = `if command -v bash >/dev/null 2>&1; then exec bash "$1"; fi
echo "talkops: bash is not installed in the sandbox; running the setup script with sh" >&2
exec sh "$1"`

// setup uploads the script and runs it with bash in the working directory. Host
// environment variables are never expanded into it. Its output is streamed as events.
func (r *run) setup(ctx context.Context) error {
	rec, err := r.runSetup(ctx, r.sb, result.StageSetup)
	if rec != nil {
		r.res.Setup = rec
	}
	return err
}

// runSetup runs the setup script in sb (the run's sandbox or a clean room), streaming its
// output as events of stage.
func (r *run) runSetup(ctx context.Context, sb providers.Sandbox, stage result.StageName) (*result.Setup, error) {
	s := r.opts.SetupScript
	name := "setup.sh"
	dir := path.Join(setupDir, r.opts.RunID)
	// Whole seconds: a sub-second time would need a PAX record, which some tar programs
	// in sandboxes do not read.
	tgz, err := archive.TarGz(archive.Entry{Name: name, Mode: 0o755, Body: s.Content, ModTime: time.Now().Truncate(time.Second)})
	if err != nil {
		return nil, err
	}
	if err := sb.Upload(ctx, dir, bytes.NewReader(tgz)); err != nil {
		return nil, fmt.Errorf("upload setup script %s: %w", s.Path, err)
	}
	rel := path.Join(dir, name)
	out := &lineEmitter{sink: r.opts.Sink, stage: stage, redact: r.opts.Redact}
	res, err := sb.Exec(ctx, providers.Cmd{
		Argv:    []string{"/bin/sh", "-c", runScript, "talkops-setup", rel},
		Timeout: s.Timeout,
		Stdout:  out.stream("stdout"),
		Stderr:  out.stream("stderr"),
	})
	out.flush()
	// Remove the script so checks that look at the workspace do not see it.
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	_, _ = sb.Exec(rmCtx, providers.Cmd{Argv: []string{"rm", "-rf", dir}})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("run setup script %s: %w", s.Path, err)
	}
	tail := lastLines(string(res.Stdout)+string(res.Stderr), 20)
	if r.opts.Redact != nil {
		tail = r.opts.Redact(tail)
	}
	rec := &result.Setup{
		Script:     s.Path,
		ExitCode:   res.ExitCode,
		TimedOut:   res.TimedOut,
		DurationMS: res.Duration.Milliseconds(),
		OutputTail: tail,
	}
	if res.TimedOut {
		return rec, fmt.Errorf("setup script %s timed out after %s; last output:\n%s", s.Path, s.Timeout, indent(tail))
	}
	if res.ExitCode != 0 {
		return rec, fmt.Errorf("setup script %s exited with code %d; last output:\n%s", s.Path, res.ExitCode, indent(tail))
	}
	return rec, nil
}

func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string {
	if s == "" {
		return "  (no output)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// lineEmitter turns streamed command output into one events.Output per line.
type lineEmitter struct {
	sink   events.Sink
	stage  result.StageName
	bufs   map[string]*bytes.Buffer
	redact func(string) string // nil: none
}

func (l *lineEmitter) stream(name string) *streamWriter {
	if l.bufs == nil {
		l.bufs = map[string]*bytes.Buffer{}
	}
	b := &bytes.Buffer{}
	l.bufs[name] = b
	return &streamWriter{l: l, name: name, buf: b}
}

func (l *lineEmitter) flush() {
	for name, b := range l.bufs {
		if b.Len() > 0 {
			l.emit(name, b.String())
			b.Reset()
		}
	}
}

func (l *lineEmitter) emit(stream, line string) {
	if l.redact != nil {
		line = l.redact(line)
	}
	l.sink.Emit(events.Event{Time: time.Now(), Type: events.Output, Stage: l.stage, Message: line,
		Data: map[string]string{"stream": stream}})
}

type streamWriter struct {
	l    *lineEmitter
	name string
	buf  *bytes.Buffer
}

// Write splits on newlines; Exec may call it from another goroutine per stream, and each
// stream has its own writer and buffer.
func (w *streamWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line) // keep the partial line
			break
		}
		w.l.emit(w.name, strings.TrimRight(line, "\r\n"))
	}
	// A single runaway line must not grow without bound.
	if w.buf.Len() > 64<<10 {
		w.l.emit(w.name, w.buf.String())
		w.buf.Reset()
	}
	return len(p), nil
}
