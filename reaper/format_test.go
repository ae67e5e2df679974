package reaper

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWriteTable(t *testing.T) {
	t.Parallel()
	entries := []Entry{
		{Provider: "docker", ID: strings.Repeat("ab", 32), RunID: "gh-77", State: "running", CreatedAt: now.Add(-90 * time.Minute),
			ExpiresAt: now.Add(-5 * time.Minute), OwnerPID: 12, OwnerHost: "ci-2", Owner: OwnerUnknown},
		{Provider: "bwrap", ID: "talkops-x-0011aabb", State: StateGone, CreatedAt: now.Add(-50 * time.Hour), OwnerPID: 9, Owner: OwnerGone, InLedger: true},
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, entries, now); err != nil {
		t.Fatal(err)
	}
	want := `PROVIDER  ID                  RUN ID  STATE    AGE    EXPIRES  OWNER                  LEDGER
docker    abababababab        gh-77   running  1h30m  5m ago   pid 12@ci-2 (unknown)  no
bwrap     talkops-x-0011aabb  -       gone     2d2h   -        pid 9 (gone)           yes
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("WriteTable (-want +got):\n%s", diff)
	}
	buf.Reset()
	if err := WriteTable(&buf, nil, now); err != nil || buf.String() != "no sandboxes\n" {
		t.Errorf("WriteTable(nil) = %q, %v", buf.String(), err)
	}
}

func TestWriteReport(t *testing.T) {
	t.Parallel()
	rep := Report{
		DryRun:  true,
		Deleted: []Action{{Entry: Entry{Provider: "docker", ID: "c1", RunID: "r1"}, Reason: "expired 5m0s ago"}},
		Kept:    []Action{{Entry: Entry{Provider: "bwrap", ID: "b1"}, Reason: "owner pid 3 is running"}},
	}
	var buf bytes.Buffer
	if err := WriteReport(&buf, rep); err != nil {
		t.Fatal(err)
	}
	want := `ACTION        PROVIDER  ID  RUN ID  REASON
would delete  docker    c1  r1      expired 5m0s ago
kept          bwrap     b1  -       owner pid 3 is running

1 would delete, 0 failed, 0 ledger entries forgotten, 1 kept
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("WriteReport (-want +got):\n%s", diff)
	}
	buf.Reset()
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("WriteJSON output does not parse: %v\n%s", err, buf.String())
	}
	if diff := cmp.Diff(rep, back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
}
