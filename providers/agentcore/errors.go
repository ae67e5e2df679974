package agentcore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// Error is a failed AgentCore call, after the SDK's retries.
type Error struct {
	// Op is the operation ("StartCodeInterpreterSession", "InvokeCodeInterpreter executeCommand").
	Op string
	// Status is the HTTP status, 0 when the error came inside an event stream or before
	// any answer.
	Status int
	// Code and Message are the service's error type and message, when it sent them.
	Code, Message string
	// RequestID is AgentCore's request id, for AWS support.
	RequestID string
	// Attempts is how many times the SDK sent the request, when it gave up retrying.
	Attempts int
	// Err is the SDK's error.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	switch {
	case e.Code != "":
		if e.Status != 0 {
			fmt.Fprintf(&b, ": HTTP %d", e.Status)
		}
		fmt.Fprintf(&b, ": %s", e.Code)
		if e.Message != "" {
			fmt.Fprintf(&b, ": %s", e.Message)
		}
	default:
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request id %s)", e.RequestID)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " [gave up after %d attempts]", e.Attempts)
	}
	return b.String()
}

// Unwrap returns the SDK's error, so errors.Is finds context.Canceled and errors.As the
// SDK's typed exceptions.
func (e *Error) Unwrap() error { return e.Err }

// apiError describes err, an error of the SDK's operation op.
func apiError(op string, err error) error {
	if err == nil {
		return nil
	}
	e := &Error{Op: op, Err: err}
	var api smithy.APIError
	if errors.As(err, &api) {
		e.Code, e.Message = api.ErrorCode(), api.ErrorMessage()
	}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) {
		e.Status, e.RequestID = resp.HTTPStatusCode(), resp.ServiceRequestID()
	}
	var maxErr *retry.MaxAttemptsError
	if errors.As(err, &maxErr) {
		e.Attempts = maxErr.Attempt
	}
	return e
}

// errorCode returns the service's error type in err's chain, or "".
func errorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// notFound reports a ResourceNotFoundException: the session is unknown, stopped or expired.
func notFound(err error) bool { return err != nil && errorCode(err) == "ResourceNotFoundException" }

// invalid reports a ValidationException, which a malformed session id gets.
func invalid(err error) bool { return err != nil && errorCode(err) == "ValidationException" }
