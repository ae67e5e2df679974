package changeset

import (
	"fmt"
	"slices"
	"strings"
)

// Change kinds.
const (
	Added    = "added"
	Modified = "modified"
	Removed  = "removed"
	// ModeChanged is a path whose content is the same and whose permissions are not.
	ModeChanged = "mode"
	// TypeChanged is a path that became another kind of entry (file ↔ symlink ↔ dir).
	TypeChanged = "type"
)

// Change is one changed path. Before is the zero Entry for an added path, After for a
// removed one.
type Change struct {
	Path   string
	Kind   string
	Before Entry
	After  Entry
}

// Set is the change set of one agent pass: every changed path, sorted, against the baseline.
type Set struct {
	Changes []Change
}

// Compare lists every path that differs between base and now, sorted by path. Directories
// count as paths (an added empty directory is a change), so that nothing the agent made is
// left out.
func Compare(base, now *Tree) *Set {
	var paths []string
	for p := range base.entries {
		paths = append(paths, p)
	}
	for p := range now.entries {
		if _, ok := base.entries[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	s := &Set{}
	for _, p := range paths {
		b, inBase := base.entries[p]
		a, inNow := now.entries[p]
		c := Change{Path: p, Before: b, After: a}
		switch {
		case !inNow:
			c.Kind = Removed
		case !inBase:
			c.Kind = Added
		case b.same(a):
			continue
		case b.Type != a.Type:
			c.Kind = TypeChanged
		case b.Type == TypeDir || (b.SHA256 == a.SHA256 && b.Target == a.Target && b.Size == a.Size):
			c.Kind = ModeChanged
		default:
			c.Kind = Modified
		}
		s.Changes = append(s.Changes, c)
	}
	return s
}

// Counts returns how many changes of each kind the set holds.
func (s *Set) Counts() map[string]int {
	out := map[string]int{}
	for _, c := range s.Changes {
		out[c.Kind]++
	}
	return out
}

// Describe is one line for the change: "modified a.go: file 120 bytes sha256 1a2b… mode
// 0644 → file 134 bytes sha256 3c4d… mode 0644".
func (c Change) Describe() string {
	return c.Kind + " " + c.sides()
}

// summaryLine is the change on the judge's summary, after its A/M/D mark.
func (c Change) summaryLine() string {
	switch c.Kind {
	case ModeChanged:
		return "(mode changed) " + c.sides()
	case TypeChanged:
		return "(type changed) " + c.sides()
	}
	return c.sides()
}

func (c Change) sides() string {
	var b strings.Builder
	b.WriteString(c.Path)
	side := func(e Entry) string {
		switch e.Type {
		case TypeFile:
			return fmt.Sprintf("file %d bytes sha256 %s mode %04o", e.Size, short(e.SHA256), e.Mode.Perm())
		case TypeSymlink:
			return fmt.Sprintf("symlink to %q", e.Target)
		case "":
			return "(absent)"
		default:
			return fmt.Sprintf("%s mode %04o", e.Type, e.Mode.Perm())
		}
	}
	fmt.Fprintf(&b, ": %s → %s", side(c.Before), side(c.After))
	return b.String()
}
