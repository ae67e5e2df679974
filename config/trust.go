package config

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// trustHint says how to allow what the project file may not do, for every trust error.
var trustHint = "set it with a flag, an environment variable or ~/.talkops/config.toml instead, " +
	"or let this project's config set it with --trust-project-config (env TALKOPS_TRUST_PROJECT_CONFIG=true, " +
	"or trust_project_config = true in ~/.talkops/config.toml) if you trust every change to the repository"

// trustsProject resolves trust_project_config from the trusted layers only: the project
// file cannot vouch for itself.
func (l *loader) trustsProject(files []*fileValues) (bool, error) {
	trusted := slices.DeleteFunc(slices.Clone(files), func(fv *fileValues) bool { return fv.layer == layerProject })
	s, err := l.resolve(lookup(TrustProjectKey), l.workDir, trusted)
	if err != nil {
		return false, err
	}
	b, _ := s.val.(bool)
	return b, nil
}

// checkProjectTrust refuses what the project file sets beyond its trust: a trusted-only
// key, or a path that leaves the project once symlinks are resolved. The first offence in
// file order is the error.
func checkProjectTrust(project *fileValues, projectDir string) error {
	names := make([]string, 0, len(project.settings))
	for name := range project.settings {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		return project.settings[a].src.line - project.settings[b].src.line
	})
	root, err := realPath(projectDir)
	if err != nil {
		return fmt.Errorf("config: project directory: %w", err)
	}
	for _, name := range names {
		k, s := lookup(name), project.settings[name]
		if k.Trust != Safe {
			return errFrom(s.src, k, fmt.Sprintf("trusted-only key: the project's own config cannot set it, "+
				"because a pull request could change it to reach credentials or widen access; %s", trustHint), nil)
		}
		if k.ProjectCheck != nil {
			if err := k.ProjectCheck(s.val); err != nil {
				return errFrom(s.src, k, fmt.Sprintf("%v; %s", err, trustHint), nil)
			}
		}
		path, _ := s.val.(string)
		if (k.Type != TypePath && k.Type != TypeFile) || path == "" {
			continue
		}
		real, err := realPath(path)
		if err != nil {
			return errFrom(s.src, k, fmt.Sprintf("%s: %s", path, unwrapPathError(err)), err)
		}
		if rel, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(rel) {
			shown := path
			if real != path {
				shown += " (" + real + " after resolving symlinks)"
			}
			return errFrom(s.src, k, fmt.Sprintf("%s is outside the project %s: the project's own config may only name paths inside it; %s",
				shown, root, trustHint), nil)
		}
	}
	return nil
}

// realPath resolves every symlink in path, including in the part that does not exist
// yet (a report directory to be created): the deepest existing ancestor is resolved and
// the rest appended.
func realPath(path string) (string, error) {
	path = filepath.Clean(path)
	var rest []string
	for {
		real, err := filepath.EvalSymlinks(path)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(path)
		if parent == path {
			return "", err
		}
		rest = append([]string{filepath.Base(path)}, rest...)
		path = parent
	}
}

// safeTag marks a provider option field the project file may set: `trust:"safe"`.
// Untagged fields are trusted-only, so a new option is safe to add.
const safeTag = "safe"

// projectUntrusted reports whether the provider key at path came from a project file the
// user has not chosen to trust.
func (t ProviderTable) projectUntrusted(path []string) bool {
	fp, ok := t.pos[joinPath(path)]
	return ok && fp.file != nil && fp.file.layer == layerProject && !t.trustProject
}

// trustError is the *Error for a trusted-only provider key set by the project file.
func (t ProviderTable) trustError(path []string) *Error {
	return t.errAt(path, true, fmt.Sprintf("%s is trusted-only: the project's own config cannot set it, "+
		"because a pull request could change it to reach host paths, the network or credentials; %s",
		t.fullKey(path), strings.Replace(trustHint, "set it with a flag, an environment variable or", "set it in", 1)))
}
