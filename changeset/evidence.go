package changeset

import (
	"bytes"
	"cmp"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hexops/gotextdiff"
	"github.com/hexops/gotextdiff/myers"
	"github.com/hexops/gotextdiff/span"

	"github.com/talkops/talkops/rubric/evidence"
)

// maxTextDiffInput is the largest file (either side) whose text diff is computed; larger
// files are listed with their sizes and hashes.
const maxTextDiffInput = 256 << 10

// HiddenDirs are directory names whose changed files are listed (path, size, hash) but
// whose content is not shown to the judge: dependency trees and caches, large and generated.
var HiddenDirs = []string{"node_modules", ".terraform", ".terragrunt-cache", "__pycache__", ".venv", ".git"}

// hiddenUnder returns the hidden directory name p lies under, or "".
func hiddenUnder(p string) string {
	for seg := range strings.SplitSeq(p, "/") {
		for _, h := range HiddenDirs {
			if seg == h {
				return h
			}
		}
	}
	return ""
}

// Evidence turns the change set into the judge's diff evidence: every changed path is
// listed; text files get a unified diff computed on the host from the stored contents of
// the baseline and of the agent's pass.
func (s *Set) Evidence(store Contents) *evidence.Diff {
	d := &evidence.Diff{}
	shown, total := 0, 0
	var textual []int
	for _, c := range s.Changes {
		if c.Kind == Added && c.After.Type == TypeDir || c.Kind == Removed && c.Before.Type == TypeDir {
			continue // the files below are listed themselves
		}
		f := evidence.FileDiff{Path: c.Path, Change: evidenceChange(c.Kind), Detail: c.summaryLine()}
		switch {
		case c.Before.Type == TypeSymlink || c.After.Type == TypeSymlink:
			f.Symlink = true
			f.Text = c.Describe() + "\n"
		case hiddenUnder(c.Path) != "":
			f.Unshown = true
			f.Detail += fmt.Sprintf(" (content not shown: under %s)", hiddenUnder(c.Path))
		case c.Kind == ModeChanged || c.Kind == TypeChanged || c.After.Type == TypeOther || c.Before.Type == TypeOther:
			f.Text = c.Describe() + "\n"
		default:
			textual = append(textual, len(d.Files))
		}
		d.Files = append(d.Files, f)
	}
	for n, i := range textual {
		f := &d.Files[i]
		if n >= evidence.MaxDiffFiles || total >= evidence.MaxDiffBytes {
			f.Unshown = true
			continue
		}
		c := s.find(f.Path)
		f.Text, f.Binary = textDiff(c, store)
		f.Bytes = len(f.Text)
		if len(f.Text) > evidence.MaxFileDiffBytes {
			h := evidence.MaxFileDiffBytes / 2
			f.Text = f.Text[:h] + fmt.Sprintf("\n[... %d bytes of this file's diff cut by the runner ...]\n", len(f.Text)-evidence.MaxFileDiffBytes) + f.Text[len(f.Text)-h:]
			f.Text = strings.ToValidUTF8(f.Text, "\uFFFD")
			f.Truncated = true
		}
		total += len(f.Text)
		shown++
	}
	return d
}

func (s *Set) find(p string) Change {
	for _, c := range s.Changes {
		if c.Path == p {
			return c
		}
	}
	return Change{}
}

func evidenceChange(kind string) string {
	switch kind {
	case Added:
		return evidence.Added
	case Removed:
		return evidence.Removed
	default:
		return evidence.Modified
	}
}

// textDiff is the unified diff of a changed file, or one line saying why there is none.
func textDiff(c Change, store Contents) (string, bool) {
	side := func(e Entry) (string, string) {
		if e.Type != TypeFile {
			return "", ""
		}
		if e.Size > maxTextDiffInput {
			return "", fmt.Sprintf("%d bytes, too large to diff", e.Size)
		}
		b, err := store.ReadAll(e.SHA256, maxTextDiffInput)
		if err != nil {
			return "", "content not kept"
		}
		if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
			return "", "binary"
		}
		return string(b), ""
	}
	before, whyB := side(c.Before)
	after, whyA := side(c.After)
	if whyB == "binary" || whyA == "binary" {
		return fmt.Sprintf("Binary file %s %s (content not shown): %s\n", c.Path, c.Kind, c.Describe()), true
	}
	if why := cmp.Or(whyB, whyA); why != "" {
		return fmt.Sprintf("%s (no diff: %s)\n", c.Describe(), why), false
	}
	edits := myers.ComputeEdits(span.URIFromPath(c.Path), before, after)
	return fmt.Sprint(gotextdiff.ToUnified("a/"+c.Path, "b/"+c.Path, before, edits)), false
}
