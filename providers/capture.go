package providers

import (
	"fmt"
	"sync"
)

// CappedBuffer is an io.Writer that keeps at most a fixed number of bytes of what is
// written to it: the first half and the last half. The middle is dropped and counted, so a
// command that prints a gigabyte costs the caller at most the limit in memory, and both the
// start of the output (what the command was doing) and its end (how it failed) survive.
//
// Create one with NewCappedBuffer. It is safe for concurrent use; writes never fail.
type CappedBuffer struct {
	mu      sync.Mutex
	headCap int
	head    []byte
	tail    []byte // ring buffer of the last tailCap bytes after head filled up
	tailPos int    // next write position in tail once it is full
	tailCap int
	total   int64
}

// NewCappedBuffer returns a buffer keeping at most limit bytes (limit/2 of the head, the
// rest of the tail). A limit of 0 or less means DefaultOutputLimit.
func NewCappedBuffer(limit int) *CappedBuffer {
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	headCap := limit / 2
	return &CappedBuffer{headCap: headCap, tailCap: limit - headCap}
}

// Write records p. It always returns len(p), nil.
func (b *CappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.headCap - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || b.tailCap == 0 {
		return n, nil
	}
	if len(p) >= b.tailCap {
		// Only the last tailCap bytes of p can survive.
		b.tail = append(b.tail[:0], p[len(p)-b.tailCap:]...)
		b.tailPos = 0
		return n, nil
	}
	if room := b.tailCap - len(b.tail); room > 0 {
		k := min(room, len(p))
		b.tail = append(b.tail, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // the ring is full: overwrite the oldest bytes
		k := copy(b.tail[b.tailPos:], p)
		p = p[k:]
		b.tailPos = (b.tailPos + k) % b.tailCap
	}
	return n, nil
}

// Truncated reports whether more bytes were written than the buffer keeps.
func (b *CappedBuffer) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.omitted() > 0
}

// Len is the number of bytes written so far, including any dropped ones.
func (b *CappedBuffer) Len() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Bytes returns a copy of what was kept. When bytes were dropped, the head and the tail are
// joined by a marker line "\n... [N bytes omitted] ...\n".
func (b *CappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	var marker string
	if n := b.omitted(); n > 0 {
		marker = fmt.Sprintf("\n... [%d bytes omitted] ...\n", n)
	}
	out := make([]byte, 0, len(b.head)+len(marker)+len(b.tail))
	out = append(out, b.head...)
	out = append(out, marker...)
	out = append(out, b.tail[b.tailPos:]...)
	out = append(out, b.tail[:b.tailPos]...)
	return out
}

// String returns Bytes as a string.
func (b *CappedBuffer) String() string { return string(b.Bytes()) }

func (b *CappedBuffer) omitted() int64 {
	return b.total - int64(len(b.head)) - int64(len(b.tail))
}

// MemoryLimitNote is what a sandbox appends to a command's stderr when the kernel killed
// it for exceeding the sandbox's memory limit.
func MemoryLimitNote(limit int64) string {
	return "killed: memory limit (" + humanBytes(limit) + ") exceeded"
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
