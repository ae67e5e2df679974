package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// listTracked is gitTracked; the benchmark swaps it to measure the rules without git.
var listTracked = gitTracked

// gitTracked lists the files git tracks under root, relative to root and sorted, or nil
// when root is not inside a git work tree or git is not installed (Pack then applies
// every rule to every path, as outside git).
func gitTracked(ctx context.Context, root string) ([]string, error) {
	bin, err := exec.LookPath("git")
	if err != nil {
		return nil, nil
	}
	cmd := exec.CommandContext(ctx, bin, "-C", root, "ls-files", "-z", "--cached")
	// Variables that point git elsewhere would describe another tree.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, k := range []string{"GIT_DIR=", "GIT_WORK_TREE=", "GIT_INDEX_FILE=", "GIT_CEILING_DIRECTORIES=", "GIT_COMMON_DIR="} {
			if strings.HasPrefix(kv, k) {
				return true
			}
		}
		return false
	})
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, ctxErr
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil, nil // not a work tree (or one git refuses to read): no tracked files
	}
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	slices.Sort(files)
	if files == nil {
		files = []string{} // a work tree with nothing tracked yet
	}
	return files, nil
}
