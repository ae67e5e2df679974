// Package state is the local ledger of the sandboxes talkops created, one JSON file per
// sandbox, so that a run killed before its teardown can still be reaped by
// `talkops sandbox gc`.
//
// Before asking a provider to create, the runner records a pending entry (Pending set, no
// id yet) for its provider, run id and pid; it replaces that with the real entry right
// after Create returns and before the sandbox is first used, drops it when the create
// fails, and calls Remove after a successful delete. A pending entry left behind by a
// run killed mid-create is how gc tells the sandbox that run's create made, found by its
// run-id label, from one whose owner may still be alive. Every write is atomic (a temporary file
// renamed into place) and every sandbox has its own file, so concurrent talkops processes
// sharing the directory never lose each other's entries.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Entry is what the ledger remembers about one created sandbox.
type Entry struct {
	Provider   string    `json:"provider"`
	ID         string    `json:"id"`
	RunID      string    `json:"run_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	ProjectDir string    `json:"project_dir,omitempty"`
	// PID is the talkops process that created the sandbox; gc can tell a live run from
	// a dead one on the same host.
	PID int `json:"pid,omitempty"`
	// Host is the host PID runs on; "" (entries written before it was recorded) means
	// the host that reads the ledger.
	Host string `json:"host,omitempty"`
	// Pending marks a create that was requested and has not returned an id: ID is empty
	// and the entry is keyed by Provider, RunID and PID instead.
	Pending bool `json:"pending,omitempty"`
}

// Expired reports whether the entry has an expiry and it is before now.
func (e Entry) Expired(now time.Time) bool {
	return !e.ExpiresAt.IsZero() && e.ExpiresAt.Before(now)
}

// DefaultDir returns $XDG_STATE_HOME/talkops/sandboxes, or ~/.local/state/talkops/sandboxes
// when XDG_STATE_HOME is unset or not absolute (as the XDG spec requires). It returns ""
// when neither XDG_STATE_HOME nor HOME is usable.
func DefaultDir(getenv func(string) string) string {
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "talkops", "sandboxes")
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "talkops", "sandboxes")
	}
	return ""
}

// ProviderDir returns where a provider that keeps sandboxes on this host (local's process
// records, bwrap's sandbox directories) keeps them: a sibling of the ledger,
// DefaultDir/../<provider>, so everything one user (or one test, with its own
// XDG_STATE_HOME) creates lives under one root and nothing is shared with other users
// or other roots. Without a usable XDG_STATE_HOME or HOME it is
// $TMPDIR/talkops-<uid>/<provider>, still per user.
func ProviderDir(getenv func(string) string, provider string) string {
	if d := DefaultDir(getenv); d != "" {
		return filepath.Join(filepath.Dir(d), provider)
	}
	tmp := getenv("TMPDIR")
	if !filepath.IsAbs(tmp) {
		tmp = os.TempDir()
	}
	return filepath.Join(tmp, "talkops-"+strconv.Itoa(os.Getuid()), provider)
}

// FileName returns the name of the file that holds the entry for provider and id:
// "<provider>-<id>.json", with bytes outside [A-Za-z0-9._-] escaped as %XX so that any
// provider id makes one safe file name.
func FileName(provider, id string) string {
	return escape(provider) + "-" + escape(id) + ".json"
}

func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.' || c == '_' || c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// PendingFileName returns the name of the file that holds the pending entry of a create
// by process pid for run runID: "<provider>+pending-<run id>-<pid>.json". The '+' is
// escaped in every FileName, so the two kinds of name never collide.
func PendingFileName(provider, runID string, pid int) string {
	return escape(provider) + "+pending-" + escape(runID) + "-" + strconv.Itoa(pid) + ".json"
}

// fileName returns where e is kept, checking its key.
func (e Entry) fileName(dir string) (string, error) {
	if !e.Pending {
		if err := checkKey(dir, e.Provider, e.ID); err != nil {
			return "", err
		}
		return FileName(e.Provider, e.ID), nil
	}
	switch {
	case dir == "":
		return "", errors.New("no state directory (set XDG_STATE_HOME or HOME)")
	case e.Provider == "":
		return "", errors.New("pending entry has no provider")
	case e.ID != "":
		return "", fmt.Errorf("pending entry has id %q; a pending entry has none", e.ID)
	case e.RunID == "":
		return "", errors.New("pending entry has no run id")
	case e.PID <= 0:
		return "", errors.New("pending entry has no pid")
	}
	return PendingFileName(e.Provider, e.RunID, e.PID), nil
}

// key names e in messages: provider/id, or provider/pending-<run id>-<pid>.
func (e Entry) key() string {
	if e.Pending {
		return fmt.Sprintf("%s/pending-%s-%d", e.Provider, e.RunID, e.PID)
	}
	return e.Provider + "/" + e.ID
}

func checkKey(dir, provider, id string) error {
	switch {
	case dir == "":
		return errors.New("no state directory (set XDG_STATE_HOME or HOME)")
	case provider == "":
		return errors.New("entry has no provider")
	case id == "":
		return errors.New("entry has no id")
	}
	return nil
}

// Record writes e to dir (created with mode 0700 if missing), replacing any entry for the
// same provider and id (for a pending entry: provider, run id and pid). The file is
// complete or absent, never partial.
func Record(dir string, e Entry) error {
	name, err := e.fileName(dir)
	if err != nil {
		return fmt.Errorf("state: record: %w", err)
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = time.Now().UTC()
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("state: record %s: %w", e.key(), err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state: record %s: %w", e.key(), err)
	}
	if err := writeAtomic(filepath.Join(dir, name), append(b, '\n')); err != nil {
		return fmt.Errorf("state: record %s: %w", e.key(), err)
	}
	return nil
}

// writeAtomic writes data to a temporary file in the same directory, syncs it and renames
// it over path.
func writeAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Remove deletes the entry for provider and id. Removing an entry that does not exist is
// not an error.
func Remove(dir, provider, id string) error {
	if err := checkKey(dir, provider, id); err != nil {
		return fmt.Errorf("state: remove: %w", err)
	}
	err := os.Remove(filepath.Join(dir, FileName(provider, id)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: remove %s/%s: %w", provider, id, err)
	}
	return nil
}

// RemovePending deletes the pending entry of a create by process pid for run runID.
// Removing one that does not exist is not an error.
func RemovePending(dir, provider, runID string, pid int) error {
	e := Entry{Provider: provider, RunID: runID, PID: pid, Pending: true}
	name, err := e.fileName(dir)
	if err != nil {
		return fmt.Errorf("state: remove: %w", err)
	}
	err = os.Remove(filepath.Join(dir, name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: remove %s: %w", e.key(), err)
	}
	return nil
}

// List returns every entry in dir, oldest first, pending ones included. A missing directory is an empty ledger.
// Files that cannot be read or parsed are reported in the error (naming each file)
// while the readable entries are still returned.
func List(dir string) ([]Entry, error) {
	if dir == "" {
		return nil, errors.New("state: list: no state directory (set XDG_STATE_HOME or HOME)")
	}
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: list: %w", err)
	}
	var entries []Entry
	var errs []error
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var e Entry
		if err := json.Unmarshal(b, &e); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if _, err := e.fileName(dir); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b Entry) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		if c := strings.Compare(a.Provider, b.Provider); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(errs) > 0 {
		return entries, fmt.Errorf("state: list: %w", errors.Join(errs...))
	}
	return entries, nil
}
