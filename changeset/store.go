package changeset

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// DefaultStoreMaxBytes caps the file contents a Store keeps on disk.
const DefaultStoreMaxBytes = 2 << 30

// Store keeps file contents on the host, one file per sha256, in a private temporary
// directory. It refuses contents beyond its cap (the file is then listed by hash, but its
// content is not available to diff or apply). Close removes the directory.
type Store struct {
	dir string
	max int64

	mu      sync.Mutex
	have    map[string]bool
	used    int64
	refused int64 // bytes not kept because of the cap
}

// NewStore creates a Store in a new directory under parent ("" is the system temp dir),
// keeping at most maxBytes (0: DefaultStoreMaxBytes).
func NewStore(parent string, maxBytes int64) (*Store, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultStoreMaxBytes
	}
	dir, err := os.MkdirTemp(parent, "talkops-changeset-")
	if err != nil {
		return nil, fmt.Errorf("create the change set store: %w", err)
	}
	return &Store{dir: dir, max: maxBytes, have: map[string]bool{}}, nil
}

// Dir is the directory holding the contents.
func (s *Store) Dir() string { return s.dir }

// Has reports whether the content with this sha256 is kept.
func (s *Store) Has(sum string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.have[sum]
}

// Refused is how many bytes were not kept because of the cap.
func (s *Store) Refused() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Open returns the content with this sha256.
func (s *Store) Open(sum string) (*os.File, error) {
	if !s.Has(sum) {
		return nil, fmt.Errorf("content %s is not kept (the store's cap of %d MiB was reached)", short(sum), s.max>>20)
	}
	return os.Open(filepath.Join(s.dir, sum))
}

// ReadAll returns the content with this sha256 when it is at most limit bytes.
func (s *Store) ReadAll(sum string, limit int64) ([]byte, error) {
	f, err := s.Open(sum)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLong
	}
	return b, nil
}

var errTooLong = errors.New("content too long")

// Close removes the store's directory. It is safe to call more than once.
func (s *Store) Close() error {
	if s == nil || s.dir == "" {
		return nil
	}
	err := os.RemoveAll(s.dir)
	s.mu.Lock()
	s.have = map[string]bool{}
	s.mu.Unlock()
	return err
}

// pending is one file's content read from the archive before its hash is known: in memory
// when small, else in a temporary file of the store.
type pending struct {
	s       *Store
	size    int64
	buf     []byte
	scratch *bytes.Buffer // returned to the pool by finish
	tmp     string
}

// scratch holds small files between reading and storing, reused across files.
var scratch = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (s *Store) begin(r io.Reader, small int) (*pending, error) {
	p := &pending{s: s}
	b := scratch.Get().(*bytes.Buffer)
	b.Reset()
	if _, err := b.ReadFrom(io.LimitReader(r, int64(small)+1)); err != nil {
		scratch.Put(b)
		return nil, err
	}
	if b.Len() <= small {
		p.scratch, p.buf, p.size = b, b.Bytes(), int64(b.Len())
		return p, nil
	}
	buf := bytes.Clone(b.Bytes())
	scratch.Put(b)
	f, err := os.CreateTemp(s.dir, "incoming-")
	if err != nil {
		return nil, err
	}
	p.tmp = f.Name()
	n, err := io.Copy(f, io.MultiReader(bytes.NewReader(buf), r))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	p.size = n
	if err != nil {
		os.Remove(p.tmp)
		return nil, err
	}
	return p, nil
}

// finish keeps the content under its sha256 when keep is set, it is not kept yet and
// the cap allows; otherwise it is dropped.
func (p *pending) finish(sum string, keep bool) error {
	if p.scratch != nil {
		defer scratch.Put(p.scratch)
	}
	s := p.s
	s.mu.Lock()
	store := keep && !s.have[sum]
	if store && s.used+p.size > s.max {
		s.refused += p.size
		store = false
	}
	if store {
		s.used += p.size
		s.have[sum] = true
	}
	s.mu.Unlock()
	dst := filepath.Join(s.dir, sum)
	switch {
	case !store && p.tmp != "":
		return os.Remove(p.tmp)
	case !store:
		return nil
	case p.tmp != "":
		return os.Rename(p.tmp, dst)
	default:
		return os.WriteFile(dst, p.buf, 0o600)
	}
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// Contents is where Apply and Evidence read file contents: a Store, or several.
type Contents interface {
	Has(sum string) bool
	Open(sum string) (*os.File, error)
	ReadAll(sum string, limit int64) ([]byte, error)
}

// contents looks a sha256 up in each store in turn.
type contents []*Store

func (c contents) pick(sum string) *Store {
	for _, s := range c {
		if s.Has(sum) {
			return s
		}
	}
	return c[len(c)-1]
}

func (c contents) Has(sum string) bool               { return c.pick(sum).Has(sum) }
func (c contents) Open(sum string) (*os.File, error) { return c.pick(sum).Open(sum) }
func (c contents) ReadAll(sum string, limit int64) ([]byte, error) {
	return c.pick(sum).ReadAll(sum, limit)
}
