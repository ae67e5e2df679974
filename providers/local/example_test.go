//go:build unix

package local_test

import (
	"context"
	"fmt"
	"os"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
)

func Example() {
	ctx := context.Background()
	project, err := os.MkdirTemp("", "project")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(project)

	p := local.New(local.Options{})
	sb, err := p.Create(ctx, providers.Spec{RunID: "run-1", ProjectDir: project})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close(context.WithoutCancel(ctx))

	res, err := sb.Exec(ctx, providers.Shell("echo hello; exit 3"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s %q exit %d\n", sb.ID(), res.Stdout, res.ExitCode)
	// Output: local-run-1 "hello\n" exit 3
}
