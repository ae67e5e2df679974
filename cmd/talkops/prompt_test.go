package main

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"
)

func TestResolvePrompt(t *testing.T) {
	t.Parallel()
	files := map[string]string{"task.md": "from a file"}
	readFile := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	tests := []struct {
		name    string
		in      promptInput
		want    string
		wantErr string
	}{
		{name: "flag", in: promptInput{flag: "do it"}, want: "do it"},
		{name: "positional", in: promptInput{positional: []string{"run", "the", "tests"}}, want: "run the tests"},
		{name: "file", in: promptInput{file: "task.md"}, want: "from a file"},
		{name: "missing file", in: promptInput{file: "nope.md"}, wantErr: "--prompt-file"},
		{name: "stdin prepended", in: promptInput{flag: "summarise", stdin: strings.NewReader("log line\n")}, want: "log line\n\nsummarise"},
		{name: "stdin alone", in: promptInput{stdin: strings.NewReader("the whole prompt")}, want: "the whole prompt"},
		{name: "prompt-file -", in: promptInput{file: "-", stdin: strings.NewReader("from stdin")}, want: "from stdin"},
		{name: "empty stdin", in: promptInput{flag: "x", stdin: strings.NewReader("")}, want: "x"},
		{name: "none", in: promptInput{}, want: ""},
		{name: "twice", in: promptInput{flag: "a", positional: []string{"b"}}, wantErr: "give the prompt once"},
		{name: "file and dash", in: promptInput{flag: "a", file: "-"}, wantErr: "give the prompt once"},
		{name: "blank flag", in: promptInput{flag: "   "}, wantErr: "empty"},
		{name: "stdin too large", in: promptInput{flag: "x", stdin: strings.NewReader(strings.Repeat("a", maxStdin+1))}, wantErr: "10 MiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.in.readFile = readFile
			got, err := resolvePrompt(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !isUsage(err) {
					t.Fatalf("resolvePrompt() = %q, %v; want a usage error mentioning %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("resolvePrompt() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// A silent pipe on stdin (left open by some CI agents) must not hang a run that already
// has its prompt.
func TestSilentStdinPipeDoesNotHang(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); r.Close() })
	done := make(chan error, 1)
	go func() {
		got, err := resolvePrompt(promptInput{flag: "go", stdin: r})
		if err == nil && got != "go" {
			err = errors.New("prompt " + got)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("resolvePrompt hung on a silent stdin pipe")
	}
}

func TestPipedStdinIsRead(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	go func() {
		_, _ = w.WriteString("diff --git a b\n") // a failed write shows as a wrong prompt below
		_ = w.Close()
	}()
	got, err := resolvePrompt(promptInput{flag: "review", stdin: r})
	if err != nil || got != "diff --git a b\n\nreview" {
		t.Fatalf("resolvePrompt() = %q, %v", got, err)
	}
}
