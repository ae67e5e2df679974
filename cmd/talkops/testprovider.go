//go:build !talkops_testprovider

package main

import "github.com/talkops/talkops/providers/builtin"

// testProviders adds nothing to a release build: the fake provider exists only in a
// binary built with -tags talkops_testprovider (see testprovider_fake.go).
func testProviders(func(string) string) builtin.Registry { return nil }
