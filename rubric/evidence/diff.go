package evidence

import (
	"context"
	"fmt"
	"strings"

	"github.com/talkops/talkops/providers"
)

// Limits of the diff evidence.
const (
	// MaxDiffFiles is how many changed files a diff shows the text of; further changed
	// files are listed without it.
	MaxDiffFiles = 300
	// MaxFileDiffBytes caps the diff text kept per file (head and tail).
	MaxFileDiffBytes = 256 << 10
	// MaxDiffBytes caps the diff text of all files together.
	MaxDiffBytes = 8 << 20
)

// Change kinds of a FileDiff.
const (
	Added    = "added"
	Modified = "modified"
	Removed  = "removed"
)

// FileDiff is one changed file.
type FileDiff struct {
	// Path is slash-separated, relative to the workspace.
	Path   string
	Change string
	// Text is the unified diff (labels a/PATH and b/PATH), cut to its head and tail when
	// longer than the per-file cap; for a symlink or binary file, one line saying so.
	Text string
	// Bytes is the size of the whole diff text before it was cut.
	Bytes     int
	Truncated bool
	Binary    bool
	Symlink   bool
	// Unshown is set for files listed without text: beyond MaxDiffFiles, or under a
	// dependency or cache directory.
	Unshown bool
	// Detail, when set, describes the change on the summary line (sizes, hashes, modes).
	Detail string
}

// Differ computes the workspace diff the judge is shown: the runner's host-side change
// set (changeset.Recorder), never anything the sandbox computes.
type Differ interface {
	Diff(ctx context.Context, sb providers.Sandbox) (*Diff, error)
}

// Diff is the workspace compared with its baseline.
type Diff struct {
	Files []FileDiff
}

// Summary lists the changed files, one per line: "M path", "A path", "D path".
func (d *Diff) Summary() string {
	if d == nil || len(d.Files) == 0 {
		return "no file changed\n"
	}
	var b strings.Builder
	var n [3]int
	for _, f := range d.Files {
		switch f.Change {
		case Added:
			n[0]++
		case Modified:
			n[1]++
		case Removed:
			n[2]++
		}
	}
	files := "files"
	if len(d.Files) == 1 {
		files = "file"
	}
	fmt.Fprintf(&b, "%d %s changed: %d added, %d modified, %d removed\n", len(d.Files), files, n[0], n[1], n[2])
	for _, f := range d.Files {
		mark := map[string]string{Added: "A", Modified: "M", Removed: "D"}[f.Change]
		if f.Detail != "" {
			fmt.Fprintf(&b, "%s %s\n", mark, f.Detail)
			continue
		}
		fmt.Fprintf(&b, "%s %s", mark, f.Path)
		switch {
		case f.Symlink:
			b.WriteString(" (symlink)")
		case f.Binary:
			b.WriteString(" (binary)")
		case f.Unshown:
			b.WriteString(" (diff not shown: too many changed files)")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// String is the whole diff as text.
func (d *Diff) String() string {
	if d == nil {
		return ""
	}
	var b strings.Builder
	for _, f := range d.Files {
		if f.Text == "" {
			continue
		}
		b.WriteString(f.Text)
		if !strings.HasSuffix(f.Text, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
