// Command fakemodel serves a modeltest script over HTTP so that another process (the real
// talkops binary in end-to-end tests) can talk to a scripted model:
//
//	fakemodel -script steps.json [-addr 127.0.0.1:0] [-record calls.jsonl] [-api-key KEY]
//
// It prints the base URL on the first line of stdout (Anthropic: URL; OpenAI: URL + "/v1")
// and serves until SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/talkops/talkops/agent/model/modeltest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("fakemodel", flag.ContinueOnError)
	script := fs.String("script", "", "JSON script file (see modeltest.Script)")
	addr := fs.String("addr", "127.0.0.1:0", "listen address (loopback)")
	record := fs.String("record", "", "append every call as a JSON line to this file")
	key := fs.String("api-key", "", "answer 401 unless requests carry this key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *script == "" {
		return fmt.Errorf("-script is required")
	}
	sc, err := modeltest.LoadScript(*script)
	if err != nil {
		return err
	}
	var opts []modeltest.Option
	if *record != "" {
		opts = append(opts, modeltest.WithRecord(*record))
	}
	if *key != "" {
		opts = append(opts, modeltest.WithAPIKey(*key))
	}
	srv, err := modeltest.Listen(*addr, sc, opts...)
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintln(stdout, srv.URL)
	<-ctx.Done()
	return nil
}
