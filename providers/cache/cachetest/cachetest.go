// Package cachetest builds fake tool homes holding credentials next to their caches, for
// tests that show a sandbox gets the caches and never the credentials. Only tests import it.
package cachetest

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Secret is the content of every credential file in the fake homes.
const Secret = "talkops-test-secret-token"

// Cache entries (relative to the homes' parent) and what they hold.
var entries = map[string]string{
	"cargo/registry/index/crates.io/se/rd/serde": "serde index",
	"cargo/git/db/dep/HEAD":                      "ref: main",
	"gradle/caches/modules-2/files-2.1/lib.jar":  "lib jar",
	"gradle/wrapper/dists/gradle-8.5-bin/x/ok":   "wrapper dist",
}

// Credentials are the files of the homes a sandbox must not see (relative to the homes'
// parent): registry tokens, configuration, binaries and init scripts.
var Credentials = []string{
	"cargo/credentials.toml",
	"cargo/credentials",
	"cargo/config.toml",
	"cargo/bin/cargo-publish-helper",
	"gradle/gradle.properties",
	"gradle/init.d/steal.gradle",
}

// Homes writes a cargo home and a gradle user home under dir and returns the
// environment that points the presets at them (CARGO_HOME, GRADLE_USER_HOME, HOME=dir).
func Homes(t testing.TB, dir string) map[string]string {
	t.Helper()
	write := func(rel, content string, mode os.FileMode) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	for rel, content := range entries {
		write(rel, content, 0o644)
	}
	for _, c := range Credentials {
		write(c, "token = \""+Secret+"\"\n", 0o600) // as the tools write them
	}
	return map[string]string{"HOME": dir, "CARGO_HOME": filepath.Join(dir, "cargo"), "GRADLE_USER_HOME": filepath.Join(dir, "gradle")}
}

// Script runs in a sandbox sharing the "cargo" and "gradle" presets of Homes. It prints
// each cache entry's content, "visible PATH" for every credential file it can see at the
// tools' homes or at the host's paths (hostDir is Homes's dir), "secret" when any file
// under the homes holds Secret, and "writable" when the tools can write their homes. Then
// it poisons a cache entry and drops a file into each home, which must not reach the host.
// WantOutput is what it prints when all is well.
func Script(hostDir string) string {
	var b strings.Builder
	b.WriteString("cat")
	for _, rel := range slices.Sorted(maps.Keys(entries)) {
		b.WriteString(" " + inHome(rel))
	}
	b.WriteString("; echo\nfor f in")
	for _, c := range Credentials {
		b.WriteString(" " + inHome(c) + " " + filepath.Join(hostDir, c))
	}
	b.WriteString(`; do test -e "$f" && echo "visible $f"; done
grep -rqs ` + Secret + ` "$CARGO_HOME" "$GRADLE_USER_HOME" && echo secret
touch "$CARGO_HOME/.package-cache" && mkdir -p "$GRADLE_USER_HOME/daemon/8.5" "$GRADLE_USER_HOME/native" && echo writable
echo poisoned > ` + inHome("cargo/registry/index/crates.io/se/rd/serde") + `
echo planted > "$CARGO_HOME/credentials.toml"; echo planted > "$GRADLE_USER_HOME/caches/planted"
true
`)
	return b.String()
}

// WantOutput is Script's output in a sandbox that shares the caches and nothing else.
func WantOutput() string {
	var b strings.Builder
	for _, rel := range slices.Sorted(maps.Keys(entries)) {
		b.WriteString(entries[rel])
	}
	return b.String() + "\nwritable\n"
}

// inHome turns "cargo/x" into "$CARGO_HOME/x" and "gradle/x" into "$GRADLE_USER_HOME/x".
func inHome(rel string) string {
	tool, rest, _ := strings.Cut(rel, "/")
	if tool == "cargo" {
		return `"$CARGO_HOME/` + rest + `"`
	}
	return `"$GRADLE_USER_HOME/` + rest + `"`
}

// Tree maps each path under root to its content ("dir" for directories), to show the host
// homes unchanged.
func Tree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
