package config_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/talkops/talkops/config"
)

func ExampleLoad() {
	dir, err := os.MkdirTemp("", "talkops-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	project := filepath.Join(dir, "repo")
	err = writeProject(project, `
[sandboxes]
default = "docker"

[sandboxes.providers.docker]
network = "none"
`)
	if err != nil {
		fmt.Println(err)
		return
	}

	// The provider and its network are trusted-only: the user vouches for this project.
	environ := map[string]string{"TALKOPS_TIMEOUT": "10m", "TALKOPS_TRUST_PROJECT_CONFIG": "true"}
	c, err := config.Load(config.Options{
		Flags:     map[string]string{"run.output_format": "json"},
		FlagNames: map[string]string{"run.output_format": "--output-format"},
		Getenv:    func(k string) string { return environ[k] },
		WorkDir:   project,
		HomeDir:   filepath.Join(dir, "home"),
		Providers: []string{"local", "docker"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Sandbox.Provider, c.Run.Timeout, c.Run.OutputFormat)
	fmt.Println(c.Source("run.timeout"))
	fmt.Println(c.Source("run.output_format"))

	// The docker provider decodes its own table, strictly.
	var opts struct {
		Network string `toml:"network"`
	}
	if err := c.Providers["docker"].Decode(&opts); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(opts.Network)
	// Output:
	// docker 10m0s json
	// env TALKOPS_TIMEOUT
	// flag --output-format
	// none
}

func ExampleError() {
	dir, err := os.MkdirTemp("", "talkops-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if err := writeProject(dir, "[sandboxes]\ndefault = \"dokcer\"\n"); err != nil {
		fmt.Println(err)
		return
	}

	_, err = config.Load(config.Options{Getenv: func(string) string { return "" }, WorkDir: dir, HomeDir: filepath.Join(dir, "home"), Providers: []string{"local", "docker"}})
	fmt.Println(err)
	// Output:
	// .talkops/config.toml:2:11: sandboxes.default: unknown provider "dokcer", did you mean docker? (valid providers: local, docker)
}

// writeProject makes dir a git checkout with .talkops/config.toml holding toml.
func writeProject(dir, toml string) error {
	for _, d := range []string{".git", ".talkops"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, ".talkops", "config.toml"), []byte(toml), 0o644)
}
