package agentcore_test

import (
	"fmt"
	"time"

	"github.com/talkops/talkops/providers/agentcore"
)

// A session has no labels: its name carries the run id and the expiry, and List decodes
// them again for `talkops sandbox gc`.
func ExampleParseSessionName() {
	name := agentcore.SessionName("20261130T120000Z-1a2b3c4d", time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC))
	runID, expires, ok := agentcore.ParseSessionName(name)
	fmt.Println(runID, expires.Format(time.RFC3339), ok)

	_, _, ok = agentcore.ParseSessionName("someone-elses-session")
	fmt.Println(ok)
	// Output:
	// 20261130T120000Z-1a2b3c4d 2026-11-30T13:00:00Z true
	// false
}
