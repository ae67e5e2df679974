package workspace_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/talkops/talkops/providers/workspace"
)

// Pack a small project and list what the sandbox would receive.
func ExamplePack() {
	root, err := os.MkdirTemp("", "project")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(root)
	for name, body := range map[string]string{
		".gitignore":         "*.log\n",
		".env":               "API_KEY=secret\n",
		".env.example":       "API_KEY=\n",
		"main.tf":            "terraform {}\n",
		"tests/test_main.py": "def test(): pass\n",
		"debug.log":          "noise\n",
		"node_modules/x.js":  "x\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Println(err)
			return
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			fmt.Println(err)
			return
		}
	}

	var archive bytes.Buffer
	stats, err := workspace.Pack(context.Background(), root, workspace.Options{}, &archive)
	if err != nil {
		fmt.Println(err)
		return
	}
	zr, _ := gzip.NewReader(&archive)
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(hdr.Name)
	}
	fmt.Printf("files=%d dirs=%d ignored=%d secrets=%v\n", stats.Files, stats.Dirs, stats.Ignored, stats.Secrets)
	// Output:
	// .env.example
	// .gitignore
	// main.tf
	// tests/
	// tests/test_main.py
	// files=4 dirs=1 ignored=2 secrets=[.env]
}
