package plugin_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/providers/plugin"
	"github.com/talkops/talkops/providers/plugin/plugintest"
)

// The plugin protocol's cost next to the local provider, which runs the same commands
// on the same host without a plugin in between.

func benchProviders(b *testing.B) map[string]providers.Provider {
	root := b.TempDir()
	gp, err := plugin.New(plugin.Options{Name: "goplugin", Command: []string{plugintest.GoPlugin(b)}, Options: map[string]any{"root": root}})
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]providers.Provider{"local": local.New(local.Options{}), "goplugin": gp}
	if python := pythonOrSkip(); python != "" {
		pp, err := plugin.New(plugin.Options{Name: "python", Python: python, BridgeArgs: plugin.BackendArgs("acme_sandbox.backend:AcmeSandboxBackend"),
			Env: []string{"PATH=" + os.Getenv("PATH"), "PYTHONPATH=" + plugintest.PythonDir(), "PYTHONDONTWRITEBYTECODE=1"}, Options: map[string]any{"root": root}})
		if err != nil {
			b.Fatal(err)
		}
		out["python"] = pp
	}
	return out
}

func pythonOrSkip() string {
	for _, dir := range []string{"/usr/bin", "/usr/local/bin"} {
		if _, err := os.Stat(dir + "/python3"); err == nil {
			return dir + "/python3"
		}
	}
	return ""
}

func BenchmarkExecTrue(b *testing.B) {
	for name, p := range benchProviders(b) {
		b.Run(name, func(b *testing.B) {
			sb, err := p.Create(context.Background(), providers.Spec{RunID: "bench", ProjectDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close(context.Background())
			for b.Loop() {
				if res, err := sb.Exec(context.Background(), providers.Cmd{Argv: []string{"true"}}); err != nil || res.ExitCode != 0 {
					b.Fatalf("exec: %v %d", err, res.ExitCode)
				}
			}
		})
	}
}

func BenchmarkUpload16MiB(b *testing.B) {
	body := make([]byte, 16<<20)
	for i := range body {
		body[i] = byte(i*7919 + i/251)
	}
	tgz, err := archive.TarGz(archive.Entry{Name: "blob.bin", Body: body})
	if err != nil {
		b.Fatal(err)
	}
	for name, p := range benchProviders(b) {
		b.Run(name, func(b *testing.B) {
			sb, err := p.Create(context.Background(), providers.Spec{RunID: "bench", ProjectDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close(context.Background())
			b.SetBytes(int64(len(tgz)))
			for b.Loop() {
				if err := sb.Upload(context.Background(), "up", bytes.NewReader(tgz)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStart is one plugin start: process, hello, shutdown, kill.
func BenchmarkStart(b *testing.B) {
	for name, p := range benchProviders(b) {
		pp, ok := p.(*plugin.Provider)
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := pp.Probe(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
