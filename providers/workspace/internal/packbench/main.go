// Command packbench packs a directory with workspace.Pack and discards the archive, for
// measuring the packer's wall time and peak memory against tar(1):
//
//	packbench -dir /tmp/tree            # writes to /dev/null
//	packbench -dir /tmp/tree -out x.tgz
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/talkops/talkops/providers/workspace"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "packbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("packbench", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory to pack")
	out := fs.String("out", os.DevNull, "where to write the archive")
	quiet := fs.Bool("q", false, "do not print the stats")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-dir is required")
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	stats, err := workspace.Pack(ctx, *dir, workspace.Options{}, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(os.Stderr, "files=%d dirs=%d ignored=%d bytes=%d sent=%d ratio=%.3f duration=%s\n",
			stats.Files, stats.Dirs, stats.Ignored, stats.Bytes, stats.BytesSent,
			float64(stats.BytesSent)/float64(max(stats.Bytes, 1)), stats.Duration)
	}
	return nil
}
