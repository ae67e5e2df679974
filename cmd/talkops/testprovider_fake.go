//go:build talkops_testprovider

package main

import (
	"github.com/talkops/talkops/providers/builtin"
	"github.com/talkops/talkops/providers/fake"
)

// testProviders adds the fake provider to a test build of the binary (the fault tests
// build it with -tags talkops_testprovider), when the environment enables it.
func testProviders(getenv func(string) string) builtin.Registry { return fake.CLIProviders(getenv) }
