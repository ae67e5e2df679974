package judge

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/rubric/evidence"
)

// Limits of file evidence.
const (
	// MaxFilesPerGlob is how many files one file:<glob> selector shows.
	MaxFilesPerGlob = 20
	// MaxFileRead is how much of one file is read from the sandbox.
	MaxFileRead = 1 << 20
	// listTimeout bounds listing the files of a glob.
	listTimeout = time.Minute
)

// Keep ranks (evidence.Source.Keep): what stays when the budget cannot hold everything.
const (
	keepTask     = 1000
	keepCheck    = 900
	keepNote     = 850
	keepSummary  = 800
	keepClaims   = 700
	keepFile     = 500
	keepDiffFile = 400
	keepCommands = 300 // commands rank 0..keepCommands by recency: the oldest go first
)

// gatherer turns a JudgeRequest into evidence sources. The diff and file listings are
// read from the sandbox once per Grade and shared by every call that selects them.
type gatherer struct {
	req    rubric.JudgeRequest
	redact func(string) string

	diffDone bool
	diff     *evidence.Diff
	diffErr  error
	files    map[string][]evidence.Source
}

// defaultSelection is what a criterion without evidence selectors is shown.
var defaultSelection = []rubric.Selector{{Kind: rubric.SelectCommands}, {Kind: rubric.SelectDiff}, {Kind: rubric.SelectCheck}}

// sources returns the evidence for one set of selectors in display order: the task, the
// checks, the diff (summary, then one item per file), files, the commands and, last, the
// agent's claims. A check selector with an empty Arg means every check.
func (g *gatherer) sources(ctx context.Context, sels []rubric.Selector) []evidence.Source {
	if len(sels) == 0 {
		sels = defaultSelection
	}
	want := map[string]bool{}
	var checkIDs, globs []string
	allChecks := false
	for _, s := range sels {
		switch s.Kind {
		case rubric.SelectCheck:
			if s.Arg == "" {
				allChecks = true
			} else if !slices.Contains(checkIDs, s.Arg) {
				checkIDs = append(checkIDs, s.Arg)
			}
		case rubric.SelectFile:
			if !slices.Contains(globs, s.Arg) {
				globs = append(globs, s.Arg)
			}
		default:
			want[s.Kind] = true
		}
	}

	var out []evidence.Source
	if p := strings.TrimSpace(g.req.Agent.Prompt); p != "" {
		out = append(out, evidence.Source{Source: "task", Title: "the task the agent was given",
			Text: g.redact(g.req.Agent.Prompt), Context: true, Keep: keepTask})
	}
	if allChecks {
		for _, it := range g.req.Checks {
			out = append(out, g.checkSource(it))
		}
	} else {
		for _, id := range checkIDs {
			i := slices.IndexFunc(g.req.Checks, func(it result.Item) bool { return it.ID == id })
			if i < 0 {
				out = append(out, evidence.Source{Source: "check:" + id, Title: "check " + id,
					Text: fmt.Sprintf("check %s was not run in this iteration\n", id), Keep: keepCheck})
				continue
			}
			out = append(out, g.checkSource(g.req.Checks[i]))
		}
	}
	if want[rubric.SelectDiff] {
		out = append(out, g.diffSources(ctx)...)
	}
	for _, glob := range globs {
		out = append(out, g.fileSources(ctx, glob)...)
	}
	if want[rubric.SelectCommands] {
		out = append(out, g.commandSources()...)
	}
	if want[rubric.SelectFinalMessage] {
		msg := g.req.Agent.FinalMessage
		if strings.TrimSpace(msg) == "" {
			msg = "(the agent gave no final message)"
		}
		out = append(out, evidence.Source{Source: "final_message", Title: "the agent's final message (unverified claims)",
			Text: g.redact(msg), Claims: true, Keep: keepClaims})
	}
	for i := range out {
		// Titles and sources come from command lines and file names: redact them too.
		out[i].Title = g.redact(out[i].Title)
		out[i].Source = g.redact(out[i].Source)
	}
	return out
}

func (g *gatherer) checkSource(it result.Item) evidence.Source {
	var b strings.Builder
	fmt.Fprintf(&b, "check %s", it.ID)
	if it.Title != "" {
		fmt.Fprintf(&b, ": %s", oneLine(it.Title))
	}
	b.WriteByte('\n')
	truncated := false
	if c := it.Check; c != nil {
		fmt.Fprintf(&b, "command: %s\n", result.ShellJoin(c.Argv))
		switch {
		case c.ExitCode != nil:
			fmt.Fprintf(&b, "exit code: %d (expected %d)", *c.ExitCode, c.ExpectExit)
		default:
			b.WriteString("exit code: none (the command did not run)")
		}
		if c.TimedOut {
			b.WriteString(", timed out")
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "status: %s\n", it.Status)
	if it.Reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", it.Reason)
	}
	if c := it.Check; c != nil {
		for _, s := range []struct{ name, text string }{{"stdout", c.StdoutTail}, {"stderr", c.StderrTail}} {
			if s.text == "" {
				fmt.Fprintf(&b, "--- %s: empty ---\n", s.name)
				continue
			}
			cut := strings.HasPrefix(s.text, "...(truncated)")
			truncated = truncated || cut
			if cut {
				fmt.Fprintf(&b, "--- %s (the end of it) ---\n", s.name)
			} else {
				fmt.Fprintf(&b, "--- %s ---\n", s.name)
			}
			b.WriteString(s.text)
			if !strings.HasSuffix(s.text, "\n") {
				b.WriteByte('\n')
			}
		}
	}
	if n := len(it.Findings); n > 0 {
		fmt.Fprintf(&b, "findings: %d\n", n)
		for i, f := range it.Findings {
			if i == 50 {
				fmt.Fprintf(&b, "(%d more findings)\n", n-50)
				break
			}
			loc := f.Path
			if f.StartLine > 0 {
				loc += fmt.Sprintf(":%d", f.StartLine)
			}
			fmt.Fprintf(&b, "- %s [%s] %s: %s\n", loc, f.Severity, f.Rule, oneLine(f.Message))
		}
	}
	return evidence.Source{Source: "check:" + it.ID, Title: "check " + it.ID + " (run by the runner)",
		Text: g.redact(b.String()), Truncated: truncated, Keep: keepCheck}
}

func (g *gatherer) diffSources(ctx context.Context) []evidence.Source {
	if !g.diffDone {
		g.diffDone = true
		switch {
		case g.req.Workspace == nil:
			g.diffErr = fmt.Errorf("the runner took no baseline of the workspace")
		case g.req.Sandbox == nil:
			g.diffErr = fmt.Errorf("no sandbox")
		default:
			g.diff, g.diffErr = g.req.Workspace.Diff(ctx, g.req.Sandbox)
		}
	}
	if g.diffErr != nil {
		return []evidence.Source{{Source: "diff", Title: "workspace diff unavailable",
			Text: g.redact("The workspace diff could not be computed: " + g.diffErr.Error() + "\n"), Keep: keepNote}}
	}
	out := []evidence.Source{{Source: "diff", Title: "files changed since the setup script ran",
		Text: g.redact(g.diff.Summary()), Keep: keepSummary}}
	for _, f := range g.diff.Files {
		if f.Text == "" {
			continue
		}
		out = append(out, evidence.Source{Source: "diff:" + f.Path, Title: f.Change + " " + f.Path,
			Text: g.redact(f.Text), Truncated: f.Truncated, Keep: keepDiffFile, Path: f.Path})
	}
	return out
}

func (g *gatherer) commandSources() []evidence.Source {
	cmds := g.req.Agent.Commands
	if len(cmds) == 0 {
		return []evidence.Source{{Source: "commands", Title: "commands the agent ran",
			Text: "The agent ran no shell command.\n", Keep: keepNote}}
	}
	out := make([]evidence.Source, 0, len(cmds))
	for i, c := range cmds {
		line := c.Command
		if strings.TrimSpace(line) == "" {
			line = result.ShellJoin(c.Argv)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "$ %s\n", line)
		fmt.Fprintf(&b, "exit code: %d", c.ExitCode)
		if c.TimedOut {
			b.WriteString(" (timed out)")
		}
		if c.Pass > 0 {
			fmt.Fprintf(&b, "; agent pass %d", c.Pass)
		}
		if d := c.Duration.Truncate(time.Millisecond); d > 0 { // whole milliseconds, as recorded
			fmt.Fprintf(&b, "; took %s", d)
		}
		b.WriteByte('\n')
		if c.Truncated {
			b.WriteString("(the sandbox kept only the head and tail of the output)\n")
		}
		for _, s := range []struct{ name, text string }{{"stdout", c.Stdout}, {"stderr", c.Stderr}} {
			if s.text == "" {
				fmt.Fprintf(&b, "--- %s: empty ---\n", s.name)
				continue
			}
			fmt.Fprintf(&b, "--- %s ---\n%s", s.name, s.text)
			if !strings.HasSuffix(s.text, "\n") {
				b.WriteByte('\n')
			}
		}
		out = append(out, evidence.Source{
			Source:    fmt.Sprintf("command:%d", i+1),
			Title:     clip(oneLine(line), 200),
			Text:      g.redact(strings.ToValidUTF8(b.String(), "\uFFFD")),
			Tail:      true,
			Truncated: c.Truncated,
			Keep:      keepCommands * i / len(cmds),
		})
	}
	return out
}

// fileSources reads the files matching glob from the sandbox: at most MaxFilesPerGlob,
// sorted, .git skipped, each up to MaxFileRead bytes; binary files are described, not
// shown. A glob that matches nothing is itself evidence (the file does not exist).
func (g *gatherer) fileSources(ctx context.Context, glob string) []evidence.Source {
	if got, ok := g.files[glob]; ok {
		return got
	}
	out := g.readFiles(ctx, glob)
	if g.files == nil {
		g.files = map[string][]evidence.Source{}
	}
	g.files[glob] = out
	return out
}

func (g *gatherer) readFiles(ctx context.Context, glob string) []evidence.Source {
	note := func(text string) []evidence.Source {
		return []evidence.Source{{Source: "file:" + glob, Title: "files matching " + glob, Text: g.redact(text), Keep: keepNote}}
	}
	sb := g.req.Sandbox
	if sb == nil {
		return note(fmt.Sprintf("Files matching %s could not be read: no sandbox.\n", glob))
	}
	paths, err := listFiles(ctx, sb, glob)
	if err != nil {
		return note(fmt.Sprintf("Files matching %s could not be listed: %v\n", glob, err))
	}
	if len(paths) == 0 {
		return note(fmt.Sprintf("No file in the workspace matches %s.\n", glob))
	}
	var out []evidence.Source
	shown := paths
	if len(shown) > MaxFilesPerGlob {
		shown = shown[:MaxFilesPerGlob]
		out = append(out, evidence.Source{Source: "file:" + glob, Title: "files matching " + glob,
			Text: g.redact(fmt.Sprintf("%d files match %s; the first %d are shown:\n%s\n", len(paths), glob,
				MaxFilesPerGlob, strings.Join(paths, "\n"))), Keep: keepNote})
	}
	for _, p := range shown {
		text, truncated := readFile(ctx, sb, p)
		out = append(out, evidence.Source{Source: "file:" + p, Title: "workspace file " + p,
			Text: g.redact(text), Truncated: truncated, Keep: keepFile, Path: p})
	}
	return out
}

// listFiles lists the regular files under the glob's static prefix (skipping .git) and
// keeps those the glob matches, sorted.
func listFiles(ctx context.Context, sb providers.Sandbox, glob string) ([]string, error) {
	root := staticPrefix(glob)
	argv := []string{"find", "./" + root, "-name", ".git", "-prune", "-o", "-type", "f", "-print"}
	if root == "." {
		argv[1] = "."
	}
	res, err := sb.Exec(ctx, providers.Cmd{Argv: argv, Timeout: listTimeout, OutputLimit: 16 << 20})
	if err != nil {
		return nil, err
	}
	if res.TimedOut {
		return nil, fmt.Errorf("listing timed out after %s", listTimeout)
	}
	// find exits non-zero when the root does not exist: that is an empty match.
	var out []string
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		p := strings.TrimPrefix(line, "./")
		if p == "" || p == "." {
			continue
		}
		if rubric.MatchGlob(glob, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// staticPrefix is the leading part of a glob without pattern characters ("." if none).
func staticPrefix(glob string) string {
	var segs []string
	parts := strings.Split(glob, "/")
	for i, s := range parts {
		if i == len(parts)-1 || s == "**" || strings.ContainsAny(s, `*?[\`) {
			break
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return "."
	}
	return strings.Join(segs, "/")
}

// readFile downloads one file: its text, or a line describing a binary or unreadable file.
func readFile(ctx context.Context, sb providers.Sandbox, p string) (string, bool) {
	rc, err := sb.Download(ctx, p)
	if err != nil {
		return fmt.Sprintf("(%s could not be read: %v)\n", p, err), false
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, MaxFileRead+1))
	if err != nil {
		return fmt.Sprintf("(%s could not be read: %v)\n", p, err), false
	}
	if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
		return fmt.Sprintf("(%s is a binary file; content not shown)\n", p), false
	}
	if len(data) > MaxFileRead {
		text := strings.ToValidUTF8(string(data[:MaxFileRead]), "\uFFFD")
		return text + fmt.Sprintf("\n[... the file continues; only its first %d bytes were read ...]\n", MaxFileRead), true
	}
	return strings.ToValidUTF8(string(data), "\uFFFD"), false
}
