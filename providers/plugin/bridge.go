package plugin

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// bridgeSource is the Python bridge (standard library only) that serves a
// SandboxBackendProtocol class or an entry-point provider over the plugin protocol.
//
//go:embed bridge.py
var bridgeSource []byte

// BridgeSource returns the Python bridge, for `python3 -` users and for tests.
func BridgeSource() []byte { return bridgeSource }

// BackendArgs are the bridge arguments that serve the class at spec ("module:Class").
func BackendArgs(spec string) []string { return []string{"--backend", spec} }

// EntryPointArgs are the bridge arguments that serve the provider registered as name.
func EntryPointArgs(name string) []string { return []string{"--entry-point", name} }

// writeBridge writes the bridge to a fresh private directory and returns the directory
// (to remove) and the script's path. Python reads the script once at start, so the caller
// removes the directory as soon as the plugin answered hello.
func writeBridge() (dir, script string, err error) {
	dir, err = os.MkdirTemp("", "talkops-bridge-")
	if err != nil {
		return "", "", fmt.Errorf("write the python bridge: %w", err)
	}
	script = filepath.Join(dir, "talkops_bridge.py")
	if err := os.WriteFile(script, bridgeSource, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", "", fmt.Errorf("write the python bridge: %w", err)
	}
	return dir, script, nil
}

// EntryPoints asks python for the provider names installed packages register under the
// entry-point groups talkops.sandbox_providers and deepagents_code.sandbox_providers.
func EntryPoints(ctx context.Context, python string, env []string) ([]string, error) {
	if python == "" {
		python = "python3"
	}
	dir, script, err := writeBridge()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, script, "--list-entry-points")
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("list python entry points: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var names []string
	if err := json.Unmarshal(out, &names); err != nil {
		return nil, fmt.Errorf("list python entry points: %w", err)
	}
	return names, nil
}
