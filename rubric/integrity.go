package rubric

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
)

// DefaultProtected are the globs every rubric protects: CI configuration, which an agent
// could otherwise edit to make a gate pass. The rubric file itself and the rubric's
// protect_paths are added by Rubric.ProtectedGlobs.
var DefaultProtected = []string{".github/workflows/**", ".gitlab-ci.yml", "Jenkinsfile"}

// SnapshotTimeout bounds the hashing command.
const SnapshotTimeout = 2 * time.Minute

// snapshotScript hashes every regular file under its arguments with tools busybox also
// has (find -exec {} +, sha256sum). Paths arrive as "$@", never inside the script, so no
// file name is ever interpreted by the shell. .git directories are skipped; symlinks are
// not followed (a protected file replaced by a symlink shows up as removed).
const snapshotScript = `for p in "$@"; do
  if [ -d "$p" ] && [ ! -L "$p" ]; then
    find "$p" -name .git -prune -o -type f -exec sha256sum {} + || exit 1
  elif [ -f "$p" ] && [ ! -L "$p" ]; then
    sha256sum "$p" || exit 1
  fi
done`

// Snapshot hashes the files matching globs in the sandbox (relative to its working
// directory) and returns path → sha256 hex. Take one before the agent runs and one after,
// and give both to Integrity. Missing paths are simply absent from the map.
func Snapshot(ctx context.Context, sb providers.Sandbox, globs []string) (map[string]string, error) {
	var roots []string
	for _, g := range globs {
		if err := validGlob(g); err != nil {
			return nil, fmt.Errorf("snapshot: glob %q: %w", g, err)
		}
		roots = append(roots, staticPrefix(g))
	}
	roots = minimalRoots(roots)
	out := map[string]string{}
	if len(roots) == 0 {
		return out, nil
	}
	argv := []string{"/bin/sh", "-c", snapshotScript, "talkops-snapshot"}
	for _, r := range roots {
		argv = append(argv, "./"+r)
	}
	res, err := sb.Exec(ctx, providers.Cmd{Argv: argv, Timeout: SnapshotTimeout, OutputLimit: 64 << 20})
	switch {
	case err != nil:
		return nil, fmt.Errorf("snapshot protected paths: %w", err)
	case res.TimedOut:
		return nil, fmt.Errorf("snapshot protected paths: timed out after %s", SnapshotTimeout)
	case res.ExitCode != 0:
		return nil, fmt.Errorf("snapshot protected paths: exit code %d: %s", res.ExitCode, firstLine(string(res.Stderr)))
	case res.Truncated:
		return nil, errors.New("snapshot protected paths: the file list is too large; narrow protect_paths")
	}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		p, sum, ok := parseSumLine(line)
		if !ok {
			continue
		}
		for _, g := range globs {
			if matchProtected(g, p) {
				out[p] = sum
				break
			}
		}
	}
	return out, nil
}

// minimalRoots drops duplicates and roots below another root.
func minimalRoots(roots []string) []string {
	slices.Sort(roots)
	roots = slices.Compact(roots)
	if slices.Contains(roots, ".") {
		return []string{"."}
	}
	var out []string
	for _, r := range roots {
		if len(out) > 0 && strings.HasPrefix(r, out[len(out)-1]+"/") {
			continue
		}
		out = append(out, r)
	}
	return out
}

// parseSumLine reads one "sha256  ./path" line (GNU coreutils prefixes lines whose name
// needed escaping with a backslash).
func parseSumLine(line string) (path, sum string, ok bool) {
	escaped := strings.HasPrefix(line, `\`)
	if escaped {
		line = line[1:]
	}
	if len(line) < 67 || (line[64] != ' ') || (line[65] != ' ' && line[65] != '*') {
		return "", "", false
	}
	sum = line[:64]
	for _, c := range sum {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return "", "", false
		}
	}
	path = line[66:]
	if escaped {
		path = strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\r`, "\r").Replace(path)
	}
	path = strings.TrimPrefix(path, "./")
	if path == "" {
		return "", "", false
	}
	return path, sum, true
}

// Integrity compares two Snapshots of the protected globs. Each protected path the agent
// modified, added or removed becomes a failing, required "integrity" item (weight 0: it
// gates, it is not scored) with a finding on the path; when nothing changed there is one
// passing "integrity" item. A nil map means that snapshot could not be taken: the result
// is one error item.
func Integrity(before, after map[string]string, r *Rubric) []result.Item {
	globs := r.ProtectedGlobs()
	if before == nil || after == nil {
		return []result.Item{integrityError(errors.New("a snapshot of the protected paths is missing"))}
	}
	var paths []string
	for p := range before {
		paths = append(paths, p)
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var items []result.Item
	checked := 0
	for _, p := range paths {
		glob := protectedBy(globs, p)
		if glob == "" {
			continue
		}
		checked++
		b, inBefore := before[p]
		a, inAfter := after[p]
		var change string
		switch {
		case inBefore && !inAfter:
			change = "removed"
		case !inBefore && inAfter:
			change = "added"
		case a != b:
			change = "modified"
		default:
			continue
		}
		msg := fmt.Sprintf("the agent %s %s, which the rubric protects (%s); before: %s, after: %s",
			change, p, glob, digestText(b, inBefore), digestText(a, inAfter))
		items = append(items, result.Item{
			ID: KindIntegrity + ":" + p, Kind: KindIntegrity, Title: "Protected path " + change + ": " + p,
			Required: true, Weight: 0, Status: result.StatusFail, Score: ptr(0.0), Reason: msg,
			Findings: []result.Finding{{
				Path: p, Severity: result.SeverityError, Rule: "protected-path", Title: "Protected path " + change,
				Message: msg, Source: "rubric",
				Fingerprint: Fingerprint(r.Name, KindIntegrity, "protected-path", p, change),
			}},
		})
	}
	if len(items) == 0 {
		items = append(items, result.Item{
			ID: KindIntegrity, Kind: KindIntegrity, Title: "Protected paths unchanged", Required: true, Weight: 0,
			Status: result.StatusPass, Score: ptr(1.0),
			Reason: fmt.Sprintf("%d protected files unchanged (%s)", checked, strings.Join(globs, ", ")),
		})
	}
	return items
}

// digestText shows one side of a protected path's change.
func digestText(d string, ok bool) string {
	switch {
	case !ok:
		return "absent"
	case strings.HasPrefix(d, "symlink:"):
		return "symlink to " + strconv.Quote(strings.TrimPrefix(d, "symlink:"))
	case len(d) == 64:
		return "sha256 " + d
	default:
		return d
	}
}

// IsProtected reports whether a workspace path (slash-separated, relative) is protected.
func (r *Rubric) IsProtected(p string) bool {
	return protectedBy(r.ProtectedGlobs(), p) != ""
}

func protectedBy(globs []string, p string) string {
	for _, g := range globs {
		if matchProtected(g, p) {
			return g
		}
	}
	return ""
}

func integrityError(err error) result.Item {
	return result.Item{
		ID: KindIntegrity, Kind: KindIntegrity, Title: "Protected paths unchanged", Required: true, Weight: 0,
		Status: result.StatusError, Reason: "could not compare protected paths: " + err.Error(),
	}
}
