package agentcore

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
)

// bodyGuard hides the WriteTo method of request bodies from net/http.
//
// The SDK closes a request's body as soon as the response headers arrive. net/http, after
// writing Content-Length bytes, copies the rest of the body to make sure there is none,
// and the SDK's body answers a WriteTo after its Close with io.EOF as an error, which
// makes net/http close the connection under the response being read. A service that
// answers as soon as it has the body (InvokeCodeInterpreter opens its event stream at
// once) then fails the stream with "use of closed network connection". A body without
// WriteTo is read with Read, which reports a clean end instead.
type bodyGuard struct {
	inner bedrockagentcore.HTTPClient
}

func (c bodyGuard) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = readCloser{req.Body}
	}
	return c.inner.Do(req)
}

// readCloser is an io.ReadCloser and nothing else.
type readCloser struct{ io.ReadCloser }
