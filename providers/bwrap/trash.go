package bwrap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/providers/cache"
)

// The lower layer of a layered workspace is a hard link per project file. Unlinking
// 20,000 of them takes about a second, in proportion to the project rather than to what
// the run wrote, and would eat the few seconds a cancelled job has to tear down. So
// teardown renames the tree into a trash directory under the state directory, which is
// one rename on the same file system, and removes it in the background. The process waits
// for that before it exits (WaitRemovals) unless a signal cut the run short; what is left
// then, or by a killed process, is removed by the next Create or `talkops sandbox gc`.
// The tree holds only links to the project's own files: nothing the run wrote waits
// there.

// trashName is the trash directory under the state directory. It is not a sandbox id,
// so List never reports it. It stays once made, so that a rename into it never races
// with its removal.
const trashName = ".trash"

// removals are the background removals of this process, each closed when done. (A
// WaitGroup would forbid a removal starting while another goroutine waits.)
var removals = struct {
	sync.Mutex
	pending map[chan struct{}]bool
}{pending: map[chan struct{}]bool{}}

// trashDir is the trash directory of the state directory base.
func trashDir(base string) string { return filepath.Join(base, trashName) }

// trashEntry names a new trash entry "<pid>-<hex>": the pid tells a sweep whether its
// owner may still be removing it.
func trashEntry(base string) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return filepath.Join(trashDir(base), strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(rnd[:]))
}

// discard moves dir into the trash of the state directory base and returns its entry
// there, for removeInBackground. Where the rename cannot be done it removes dir in place
// and returns "".
func discard(base, dir string) (string, error) {
	if err := os.MkdirAll(trashDir(base), 0o700); err != nil {
		return "", removeAll(dir)
	}
	// Moving a directory to another parent rewrites its "..", which needs write
	// permission on it; the tree carries the project's modes.
	_ = os.Chmod(dir, 0o700)
	entry := trashEntry(base)
	if err := os.Rename(dir, entry); err != nil {
		return "", removeAll(dir) // nothing when dir is already gone
	}
	return entry, nil
}

func removeInBackground(base, entry string) {
	done := make(chan struct{})
	removals.Lock()
	removals.pending[done] = true
	removals.Unlock()
	go func() {
		_ = removeTrashEntry(base, entry) // a failure leaves it for the next sweep
		removals.Lock()
		delete(removals.pending, done)
		removals.Unlock()
		close(done)
	}()
}

// removeTrashEntry removes one entry of base's trash, and nothing outside it.
func removeTrashEntry(base, entry string) error {
	trash := filepath.Clean(trashDir(base))
	entry = filepath.Clean(entry)
	if entry == trash || !cache.Within(entry, trash) {
		return fmt.Errorf("remove %s: not inside the trash directory %s", entry, trash)
	}
	return removeAll(entry)
}

// WaitRemovals waits at most d for the background removals this process had started,
// and reports whether they all finished. What is left stays in the trash, for the next
// Create or `talkops sandbox gc`.
func WaitRemovals(d time.Duration) bool {
	removals.Lock()
	pending := slices.Collect(maps.Keys(removals.pending))
	removals.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	for _, done := range pending {
		select {
		case <-done:
		case <-t.C:
			return false
		}
	}
	return true
}

// sweepTrash removes the trash entries of processes that are gone: a run killed before
// its removal finished. Each is first renamed to this process's name, so that two
// sweeps never remove the same entry. With background set the removals run as
// teardown's do; otherwise sweepTrash waits for them.
func sweepTrash(ctx context.Context, base string, background bool) error {
	ents, err := os.ReadDir(trashDir(base))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweep %s: %w", trashDir(base), err)
	}
	var errs []error
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		pid, _, ok := strings.Cut(e.Name(), "-")
		n, err := strconv.Atoi(pid)
		if ok && err == nil && (n == os.Getpid() || processAlive(n)) {
			continue // its owner is removing it
		}
		claimed := trashEntry(base)
		if err := os.Rename(filepath.Join(trashDir(base), e.Name()), claimed); err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // gone: another sweep took it
				errs = append(errs, fmt.Errorf("sweep %s: %w", trashDir(base), err))
			}
			continue
		}
		if background {
			removeInBackground(base, claimed)
			continue
		}
		if err := removeTrashEntry(base, claimed); err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", trashDir(base), err))
		}
	}
	return errors.Join(errs...)
}

// Sweep removes what teardowns of talkops processes that are gone left in the trash
// (see WaitRemovals); `talkops sandbox gc` calls it.
func (p *Provider) Sweep(ctx context.Context) error {
	r, err := p.opts.resolve()
	if err != nil {
		return fmt.Errorf("sweep bwrap trash: %w", err)
	}
	return sweepTrash(ctx, r.baseDir(), false)
}
