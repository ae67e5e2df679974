package agentcore

import (
	"context"
	"fmt"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/remote"
)

// WriteFile writes data to an absolute path of the sandbox through the driver, for tests
// of the paths Sandbox does not reach (a file outside the session's working directory).
func WriteFile(ctx context.Context, sb providers.Sandbox, p string, data []byte) error {
	rs, ok := sb.(*remote.Sandbox)
	if !ok {
		return fmt.Errorf("not an agentcore sandbox: %T", sb)
	}
	return rs.Driver().WriteFile(ctx, p, httpapi.BytesBody(data, "application/octet-stream"))
}

// Home returns the session working directory the provider probed.
func Home(sb providers.Sandbox) string { return sb.(*remote.Sandbox).Driver().(*driver).home }
