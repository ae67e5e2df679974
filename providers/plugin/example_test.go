package plugin_test

import (
	"fmt"
	"os"

	"github.com/talkops/talkops/providers/plugin"
)

// A provider for a Python SandboxBackendProtocol class, as `backend = "module:Class"`
// configures it. Nothing runs until a sandbox is created.
func ExampleNew() {
	p, err := plugin.New(plugin.Options{
		Name:       "acme",
		BridgeArgs: plugin.BackendArgs("my_org_sandbox.backend:AcmeSandboxBackend"),
		Env:        os.Environ(),
		WorkingDir: "/workspace",
		Options:    map[string]any{"region": "us-east-1", "timeout": 600},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Name())
	// Output: acme
}
