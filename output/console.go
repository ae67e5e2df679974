package output

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/result"
)

// Console is how one run shows itself: events while it runs, the outcome at the end.
type Console struct {
	Stdout, Stderr io.Writer
	Format         string // FormatText, FormatJSON or FormatStreamJSON
	// Quiet prints only the agent's final answer (or the verdict line) on stdout.
	Quiet bool
	// Actions is set in a GitHub Actions job: in text format, Groups shows each stage
	// on stdout (echoing command output inside it), and workflow commands are off while
	// the outcome, untrusted text, is printed.
	Actions bool
	Groups  events.Sink
}

func (c Console) actionsText() bool { return c.Actions && c.Format == FormatText }

// Sink is where the run's events go: the stream-json feed or the stage groups on stdout,
// and progress on stderr unless quiet.
func (c Console) Sink() events.Sink {
	sinks := []events.Sink{}
	switch {
	case c.Format == FormatStreamJSON:
		sinks = append(sinks, JSONLines(c.Stdout))
	case c.actionsText() && !c.Quiet && c.Groups != nil:
		sinks = append(sinks, c.Groups)
	}
	if !c.Quiet {
		progress := Progress(c.Stderr, IsTerminal(c.Stderr))
		if c.actionsText() {
			progress = withoutOutputLines(progress) // the groups show it
		}
		sinks = append(sinks, progress)
	}
	return events.Multi(sinks...)
}

// Print writes the outcome on stdout in the console's format.
func (c Console) Print(r *result.Result) error {
	if c.actionsText() {
		// The answer and the reasons are untrusted text: GitHub must not run workflow
		// commands hidden in them.
		resume := stopCommands(c.Stdout)
		defer resume()
	}
	switch {
	case c.Quiet:
		line := Answer(r)
		if line == "" {
			line = VerdictLine(r)
		}
		fmt.Fprintln(c.Stdout, line)
	case c.Format == FormatJSON:
		return JSON(c.Stdout, r)
	case c.Format == FormatText:
		Text(c.Stdout, r)
	}
	return nil
}

// stopCommands turns off GitHub's workflow-command processing on w until the returned
// func is called.
func stopCommands(w io.Writer) func() {
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := "talkops-" + hex.EncodeToString(b[:])
	fmt.Fprintf(w, "::stop-commands::%s\n", token)
	return func() { fmt.Fprintf(w, "::%s::\n", token) }
}

// withoutOutputLines drops command output from a sink.
func withoutOutputLines(s events.Sink) events.Sink {
	return events.Func(func(e events.Event) {
		if e.Type != events.Output {
			s.Emit(e)
		}
	})
}

// Logger writes zerolog to w: console lines on a terminal, JSON otherwise; quiet keeps
// only errors.
func Logger(w io.Writer, level string, quiet bool) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	if quiet && lvl < zerolog.ErrorLevel {
		lvl = zerolog.ErrorLevel
	}
	if IsTerminal(w) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}
