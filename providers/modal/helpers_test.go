package modal_test

import (
	"fmt"
	"testing"

	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/internal/cloudtest"
)

// tarGz returns a gzip tar of n small files under d/.
func tarGz(t *testing.T, n int) []byte {
	var entries []archive.Entry
	for i := range n {
		entries = append(entries, archive.Entry{Name: fmt.Sprintf("d/f%d.txt", i), Mode: 0o644, Body: fmt.Appendf(nil, "file %d", i)})
	}
	return cloudtest.TarGz(t, entries...)
}
