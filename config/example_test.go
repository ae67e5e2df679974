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
	os.MkdirAll(filepath.Join(project, ".git"), 0o755)
	os.MkdirAll(filepath.Join(project, ".talkops"), 0o755)
	os.WriteFile(filepath.Join(project, ".talkops", "config.toml"), []byte(`
[sandboxes]
default = "docker"

[sandboxes.providers.docker]
network = "none"
`), 0o644)

	environ := map[string]string{"TALKOPS_TIMEOUT": "10m"}
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
	os.MkdirAll(filepath.Join(dir, ".git"), 0o755)
	os.MkdirAll(filepath.Join(dir, ".talkops"), 0o755)
	os.WriteFile(filepath.Join(dir, ".talkops", "config.toml"), []byte("[sandboxes]\ndefault = \"dokcer\"\n"), 0o644)

	_, err = config.Load(config.Options{Getenv: func(string) string { return "" }, WorkDir: dir, HomeDir: filepath.Join(dir, "home"), Providers: []string{"local", "docker"}})
	fmt.Println(err)
	// Output:
	// .talkops/config.toml:2:11: sandboxes.default: unknown provider "dokcer" (valid providers: local, docker)
}
