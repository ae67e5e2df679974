package agentcore_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/agentcore"
	"github.com/talkops/talkops/providers/internal/cloudtest"
	"github.com/talkops/talkops/providers/providertest"
)

// TestLive runs the contract suite against AgentCore itself when TALKOPS_TEST_AGENTCORE=1,
// AWS credentials and a region resolve (the default chain: AWS_PROFILE, AWS_REGION,
// environment keys, SSO, ...), and -short is not set. Each subtest starts and stops its
// own sessions of the AWS-managed code interpreter (or TALKOPS_TEST_AGENTCORE_INTERPRETER).
func TestLive(t *testing.T) {
	if testing.Short() {
		t.Skip("live AgentCore test skipped in -short mode")
	}
	if os.Getenv("TALKOPS_TEST_AGENTCORE") != "1" {
		t.Skip("TALKOPS_TEST_AGENTCORE is not 1; skipping the live AgentCore contract test")
	}
	if _, err := liveProvider(); errors.Is(err, providers.ErrConfig) {
		t.Skipf("no usable AWS configuration: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	providertest.Run(t, func(context.Context, *testing.T) (providertest.Harness, error) {
		return cloudtest.LiveHarness{New: func() (providers.Provider, error) { return liveProvider() }}, nil
	})
}

func liveProvider() (*agentcore.Provider, error) {
	return agentcore.New(agentcore.Options{CodeInterpreter: os.Getenv("TALKOPS_TEST_AGENTCORE_INTERPRETER")}, os.Getenv)
}
