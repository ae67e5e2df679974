package reaper

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/talkops/talkops/providers"
)

// PrintList lists the sandboxes of the ledger in stateDir merged with what each lister
// reports, as a table or JSON. A provider that cannot be asked is reported after the
// table; the other providers are still listed.
func PrintList(ctx context.Context, w io.Writer, listers map[string]providers.Lister, stateDir string, asJSON bool, opts Options) error {
	entries, listErr := List(ctx, listers, stateDir, opts)
	var err error
	if asJSON {
		if entries == nil {
			entries = []Entry{}
		}
		err = WriteJSON(w, entries)
	} else {
		err = WriteTable(w, entries, time.Now())
	}
	return errors.Join(listErr, err)
}

// PrintGC deletes orphaned sandboxes (see GC) and prints what it did, as a report or JSON.
func PrintGC(ctx context.Context, w io.Writer, listers map[string]providers.Lister, stateDir string, olderThan time.Duration, dryRun, asJSON bool, opts Options) error {
	rep, gcErr := GC(ctx, listers, stateDir, olderThan, dryRun, opts)
	var err error
	if asJSON {
		err = WriteJSON(w, rep)
	} else {
		err = WriteReport(w, rep)
	}
	return errors.Join(gcErr, err)
}
