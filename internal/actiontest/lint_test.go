package actiontest_test

import (
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"

	"github.com/talkops/talkops/internal/actiontest"
)

// actionlint is used as a library (the same module `go tool actionlint` runs, pinned in
// go.mod): errors come back as values with file, line and rule, and the workflow that
// uses the local action can be generated in memory.

func linter(t *testing.T, root string) (*actionlint.Linter, *actionlint.Project) {
	t.Helper()
	sc := need(t, "shellcheck", "apt-get install shellcheck (actionlint checks run: scripts with it)")
	l, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{Shellcheck: sc, WorkingDir: root})
	if err != nil {
		t.Fatal(err)
	}
	p, err := actionlint.NewProject(root)
	if err != nil {
		t.Fatal(err)
	}
	return l, p
}

func describe(errs []*actionlint.Error) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "%s:%d:%d: %s [%s]\n", e.Filepath, e.Line, e.Column, e.Message, e.Kind)
	}
	return b.String()
}

// TestActionlintWorkflows lints our workflows and the example workflows.
func TestActionlintWorkflows(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	l, p := linter(t, root)
	var files []string
	for _, pat := range []string{".github/workflows/*.yml", "examples/github/*.yml", "internal/actiontest/testdata/*.yml"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 7 {
		t.Fatalf("found only %d workflows: %v", len(files), files)
	}
	errs, err := l.LintFiles(files, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Errorf("actionlint found %d problems:\n%s", len(errs), describe(errs))
	}
}

// usesLocal is a workflow that passes every input of action.yml to `uses: ./` and reads
// every output, so actionlint checks the action's metadata, input names and outputs.
func usesLocal(a *actiontest.Action, extraWith string) string {
	var b strings.Builder
	b.WriteString(`on: pull_request
permissions:
  contents: read
jobs:
  use:
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1
      - id: talkops
        uses: ./
        with:
`)
	for _, name := range slices.Sorted(maps.Keys(a.Inputs)) {
		fmt.Fprintf(&b, "          %s: x\n", name)
	}
	b.WriteString(extraWith)
	b.WriteString("      - env:\n")
	for _, name := range slices.Sorted(maps.Keys(a.Outputs)) {
		fmt.Fprintf(&b, "          OUT_%s: ${{ steps.talkops.outputs.%s }}\n", strings.ReplaceAll(strings.ToUpper(name), "-", "_"), name)
	}
	b.WriteString("        run: env | grep '^OUT_'\n")
	return b.String()
}

// TestActionlintLocalAction lints a workflow that uses this repository's action.
func TestActionlintLocalAction(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	a, err := actiontest.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	l, p := linter(t, root)
	path := filepath.Join(root, ".github", "workflows", "uses-local.yml") // not written; named for the project lookup
	errs, err := l.Lint(path, []byte(usesLocal(a, "")), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Errorf("actionlint found %d problems in a workflow using ./:\n%s", len(errs), describe(errs))
	}
}

// TestActionlintCatches proves the lint tests can fail: an unknown input of the local
// action, an unknown output, and a shellcheck finding must all be reported.
func TestActionlintCatches(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	a, err := actiontest.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	l, p := linter(t, root)
	src := usesLocal(a, "          not-an-input: x\n") +
		"      - run: echo ${{ steps.talkops.outputs.not-an-output }}\n" +
		"      - run: for f in $(ls *.txt); do echo $f; done\n"
	errs, err := l.Lint(filepath.Join(root, ".github", "workflows", "broken.yml"), []byte(src), p)
	if err != nil {
		t.Fatal(err)
	}
	got := describe(errs)
	for _, want := range []string{`"not-an-input"`, "not-an-output", "[shellcheck]"} {
		if !strings.Contains(got, want) {
			t.Errorf("actionlint did not report %s; it reported:\n%s", want, got)
		}
	}
}
