package report_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/talkops/talkops/report"
	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/result"
)

func ExampleWriteFiles() {
	dir, _ := os.MkdirTemp("", "talkops-example-")
	defer os.RemoveAll(dir)
	r, err := result.Read(filepath.Join("testdata", "rich.result.json"))
	if err != nil {
		fmt.Println(err)
		return
	}
	paths, err := report.WriteFiles(dir, r, "hunter2-super-secret")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range paths {
		fmt.Println(filepath.Base(p))
	}
	// Output:
	// summary.md
	// junit.xml
	// gl-code-quality-report.json
	// results.sarif
	// findings.rdjsonl
}

func Example_redactor() {
	red := hygiene.NewRedactor("s3cr3t-password")
	fmt.Println(red.Text("login with s3cr3t-password, cc @ops-team"))
	fmt.Println(hygiene.Fence("a ``` inside"))
	// Output:
	// login with ***, cc @‍ops-team
	// ````text
	// a ``` inside
	// ````
}
