package fake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Record is the ledger's entry for one sandbox.
type Record struct {
	ID        string            `json:"id"`
	RunID     string            `json:"run_id,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	WorkDir   string            `json:"work_dir"`
	CreatedAt time.Time         `json:"created_at"`
	// DeletedAt is zero while the sandbox is alive.
	DeletedAt time.Time `json:"deleted_at,omitzero"`
	// Attaches counts Attach calls on the sandbox.
	Attaches int `json:"attaches,omitempty"`
}

// ledgerFile is the JSON document of a ledger file.
type ledgerFile struct {
	Sandboxes []Record `json:"sandboxes"`
}

// ReadLedger reads a ledger file written by a fake provider (in this or another
// process). A missing file is an empty ledger.
func ReadLedger(path string) ([]Record, error) {
	l := &ledger{path: path}
	return l.records()
}

// ledger holds records in memory, or in a file shared across processes when path is set.
type ledger struct {
	path string

	mu  sync.Mutex
	mem map[string]Record
}

func (l *ledger) records() ([]Record, error) {
	var recs []Record
	err := l.with(false, func(m map[string]Record) error {
		for _, r := range m {
			recs = append(recs, r)
		}
		return nil
	})
	slices.SortFunc(recs, func(a, b Record) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return recs, err
}

func (l *ledger) get(id string) (Record, bool, error) {
	var rec Record
	var ok bool
	err := l.with(false, func(m map[string]Record) error {
		rec, ok = m[id]
		return nil
	})
	return rec, ok, err
}

func (l *ledger) put(r Record) error {
	return l.with(true, func(m map[string]Record) error {
		m[r.ID] = r
		return nil
	})
}

func (l *ledger) update(id string, fn func(*Record)) error {
	return l.with(true, func(m map[string]Record) error {
		r, ok := m[id]
		if !ok {
			return fmt.Errorf("ledger has no sandbox %s", id)
		}
		fn(&r)
		m[id] = r
		return nil
	})
}

func (l *ledger) markDeleted(id string) error {
	return l.update(id, func(r *Record) {
		if r.DeletedAt.IsZero() {
			r.DeletedAt = time.Now().UTC()
		}
	})
}

// with runs fn on the current records; when write is set, the records fn leaves are
// saved. With a ledger file, the whole read-modify-write holds an exclusive lock on
// path+".lock", so processes sharing the file never lose each other's updates.
func (l *ledger) with(write bool, fn func(map[string]Record) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		if l.mem == nil {
			l.mem = map[string]Record{}
		}
		return fn(l.mem)
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	unlock, err := lockFile(l.path + ".lock")
	if err != nil {
		return fmt.Errorf("ledger: lock %s: %w", l.path, err)
	}
	defer unlock()
	m := map[string]Record{}
	b, err := os.ReadFile(l.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("ledger: %w", err)
	default:
		var doc ledgerFile
		if err := json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("ledger %s: %w", l.path, err)
		}
		for _, r := range doc.Sandboxes {
			m[r.ID] = r
		}
	}
	if err := fn(m); err != nil || !write {
		return err
	}
	var doc ledgerFile
	for _, r := range m {
		doc.Sandboxes = append(doc.Sandboxes, r)
	}
	slices.SortFunc(doc.Sandboxes, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(l.path), ".ledger-*")
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	_, err = tmp.Write(append(out, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), l.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}
