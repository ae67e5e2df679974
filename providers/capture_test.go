package providers_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
)

// reference is the obvious implementation CappedBuffer must agree with.
func reference(limit int, data []byte) (string, bool) {
	if len(data) <= limit {
		return string(data), false
	}
	h := limit / 2
	t := limit - h
	return fmt.Sprintf("%s\n... [%d bytes omitted] ...\n%s", data[:h], len(data)-limit, data[len(data)-t:]), true
}

func TestCappedBuffer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		limit         int
		writes        []string
		want          string
		wantTruncated bool
	}{
		{"Empty", 10, nil, "", false},
		{"UnderLimit", 10, []string{"abc", "def"}, "abcdef", false},
		{"ExactlyLimit", 10, []string{"0123456789"}, "0123456789", false},
		{"OneOver", 10, []string{"0123456789X"}, "01234\n... [1 bytes omitted] ...\n6789X", true},
		{"ManySmallWrites", 6, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, "abc\n... [3 bytes omitted] ...\nghi", true},
		{"BigWriteThenSmall", 6, []string{"abcdefghijkl", "mn"}, "abc\n... [8 bytes omitted] ...\nlmn", true},
		{"OddLimit", 5, []string{"abcdefgh"}, "ab\n... [3 bytes omitted] ...\nfgh", true},
		{"LimitOne", 1, []string{"abc"}, "\n... [2 bytes omitted] ...\nc", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := providers.NewCappedBuffer(tc.limit)
			var total int64
			for _, w := range tc.writes {
				n, err := b.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
				total += int64(len(w))
			}
			if diff := cmp.Diff(tc.want, string(b.Bytes())); diff != "" {
				t.Errorf("Bytes() mismatch (-want +got):\n%s", diff)
			}
			if b.Truncated() != tc.wantTruncated || b.Len() != total {
				t.Errorf("Truncated() = %v, Len() = %d; want %v, %d", b.Truncated(), b.Len(), tc.wantTruncated, total)
			}
		})
	}
}

func TestCappedBufferDefaultLimit(t *testing.T) {
	t.Parallel()
	b := providers.NewCappedBuffer(0)
	data := bytes.Repeat([]byte("x"), providers.DefaultOutputLimit)
	write(t, b, data)
	if b.Truncated() {
		t.Fatalf("NewCappedBuffer(0) truncated %d bytes; want the default limit %d", len(data), providers.DefaultOutputLimit)
	}
	write(t, b, []byte("y"))
	if !b.Truncated() {
		t.Fatalf("NewCappedBuffer(0) did not truncate %d bytes", len(data)+1)
	}
}

func TestCappedBufferConcurrent(t *testing.T) {
	t.Parallel()
	b := providers.NewCappedBuffer(64)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				write(t, b, []byte("0123456789"))
				_ = b.Bytes()
			}
		})
	}
	wg.Wait()
	if b.Len() != 8000 || !strings.Contains(b.String(), "[7936 bytes omitted]") {
		t.Errorf("after concurrent writes: Len() = %d, String() = %q", b.Len(), b.String())
	}
}

func FuzzCappedBuffer(f *testing.F) {
	f.Add(10, []byte("hello world, this is long"), []byte{3, 1, 7})
	f.Add(1, []byte("ab"), []byte{0})
	f.Add(7, []byte(""), []byte{})
	f.Fuzz(func(t *testing.T, limit int, data, cuts []byte) {
		if limit <= 0 || limit > 1<<12 {
			return
		}
		b := providers.NewCappedBuffer(limit)
		rest := data
		for _, c := range cuts {
			n := min(int(c), len(rest))
			write(t, b, rest[:n])
			rest = rest[n:]
		}
		write(t, b, rest)
		want, wantTrunc := reference(limit, data)
		if got := string(b.Bytes()); got != want || b.Truncated() != wantTrunc {
			t.Errorf("limit %d, %d bytes in chunks %v: Bytes() = %q truncated %v, want %q %v", limit, len(data), cuts, got, b.Truncated(), want, wantTrunc)
		}
	})
}

// write checks the io.Writer contract on every write: all of p taken, no error. It reports
// with t.Errorf so that it is safe from the goroutines of TestCappedBufferConcurrent.
func write(t *testing.T, b *providers.CappedBuffer, p []byte) {
	t.Helper()
	if n, err := b.Write(p); n != len(p) || err != nil {
		t.Errorf("Write(%d bytes) = %d, %v; want %d, nil", len(p), n, err, len(p))
	}
}

func TestMemoryLimitNote(t *testing.T) {
	for limit, want := range map[int64]string{
		2 << 30:       "killed: memory limit (2 GiB) exceeded",
		512 << 20:     "killed: memory limit (512 MiB) exceeded",
		(1 << 20) + 1: "killed: memory limit (1048577 bytes) exceeded",
		(3 << 30) / 2: "killed: memory limit (1536 MiB) exceeded",
	} {
		if got := providers.MemoryLimitNote(limit); got != want {
			t.Errorf("MemoryLimitNote(%d) = %q, want %q", limit, got, want)
		}
	}
}
