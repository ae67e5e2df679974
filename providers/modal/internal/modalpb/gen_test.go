package modalpb_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsFresh regenerates the Go code from the .proto files and fails when
// the committed *.pb.go files differ: a .proto edit must come with `make proto`.
func TestGeneratedCodeIsFresh(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but protoc is not installed (apt-get install protobuf-compiler)")
		}
		t.Skip("protoc is not installed (apt-get install protobuf-compiler); cannot check the generated code")
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "gen.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, b)
	}
	files, err := filepath.Glob(filepath.Join(out, "*.pb.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("gen.sh generated no *.pb.go files (%v)", err)
	}
	committed, _ := filepath.Glob("*.pb.go")
	if len(committed) != len(files) {
		t.Errorf("%d committed *.pb.go files, %d generated; run `make proto`", len(committed), len(files))
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Base(f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale or missing (%v); run `make proto` and commit the result", filepath.Base(f), err)
		}
	}
}
