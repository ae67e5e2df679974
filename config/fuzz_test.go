package config

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to Load as the project's .talkops/config.toml. Load must
// not panic, and every error must be a *config.Error naming the file and a line; a file
// that loads must print, and its provider tables must decode (strictly, into a struct that
// accepts no keys) without panicking and with located errors.
func FuzzLoad(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "*.toml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"[sandboxes]\ndefault = \"docker\"\nprovider = \"local\"\n",
		"[sandboxes.providers.docker]\nworking_dir = 3\n",
		"[[sandboxes.providers.docker.x]]\na = 1\n[[sandboxes.providers.docker.x]]\nb = [1, {c = 2}]\n",
		"[run]\ntimeout = 1979-05-27T07:32:00Z\n",
		"a = \"\\u0000\"\n[\"quoted key\".x]\n",
		"[sandboxes]\nsetup_script_path = \"/dev/null\"\n",
	} {
		f.Add([]byte(s))
	}
	// One project per fuzzing process, the file rewritten for each input: inputs run one
	// at a time within a process, and creating directories per input would dominate.
	base := f.TempDir()
	project, home := filepath.Join(base, "repo"), filepath.Join(base, "home")
	for _, d := range []string{filepath.Join(project, ".git"), filepath.Join(project, ".talkops"), home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(project, ".talkops", "config.toml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(Options{Getenv: env(withTrust(nil)), WorkDir: project, HomeDir: home, Providers: testProviders})
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Load() error %T %q is not a *config.Error", err, err)
			}
			if ce.File == "" || ce.Line < 1 {
				t.Fatalf("Load() error %q has no file:line", err)
			}
			return
		}
		if err := Print(io.Discard, c); err != nil {
			t.Fatalf("Print() error: %v", err)
		}
		for name, tbl := range c.Providers {
			var none struct{}
			err := tbl.Decode(&none)
			if len(tbl.Values) == 0 {
				if err != nil {
					t.Fatalf("Decode(%s) of an empty table: %v", name, err)
				}
				continue
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.File == "" || ce.Line < 1 {
				t.Fatalf("Decode(%s) into a struct without fields = %v, want a *config.Error with file:line", name, err)
			}
		}
	})
}
