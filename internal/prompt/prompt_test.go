package prompt

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/runner"
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
		in      Input
		want    string
		wantErr string
	}{
		{name: "flag", in: Input{Flag: "do it"}, want: "do it"},
		{name: "positional", in: Input{Positional: []string{"run", "the", "tests"}}, want: "run the tests"},
		{name: "file", in: Input{File: "task.md"}, want: "from a file"},
		{name: "missing file", in: Input{File: "nope.md"}, wantErr: "--prompt-file"},
		{name: "stdin prepended", in: Input{Flag: "summarise", Stdin: strings.NewReader("log line\n")}, want: "log line\n\nsummarise"},
		{name: "stdin alone", in: Input{Stdin: strings.NewReader("the whole prompt")}, want: "the whole prompt"},
		{name: "prompt-file -", in: Input{File: "-", Stdin: strings.NewReader("from stdin")}, want: "from stdin"},
		{name: "empty stdin", in: Input{Flag: "x", Stdin: strings.NewReader("")}, want: "x"},
		{name: "none", in: Input{}, want: ""},
		{name: "twice", in: Input{Flag: "a", Positional: []string{"b"}}, wantErr: "give the prompt once"},
		{name: "file and dash", in: Input{Flag: "a", File: "-"}, wantErr: "give the prompt once"},
		{name: "blank flag", in: Input{Flag: "   "}, wantErr: "empty"},
		{name: "stdin too large", in: Input{Flag: "x", Stdin: strings.NewReader(strings.Repeat("a", maxStdin+1))}, wantErr: "10 MiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.in.ReadFile = readFile
			got, err := Resolve(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, new(*runner.UsageError)) {
					t.Fatalf("Resolve() = %q, %v; want a usage error mentioning %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resolve() = %q, %v; want %q", got, err, tc.want)
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
		got, err := Resolve(Input{Flag: "go", Stdin: r})
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
	got, err := Resolve(Input{Flag: "review", Stdin: r})
	if err != nil || got != "diff --git a b\n\nreview" {
		t.Fatalf("Resolve() = %q, %v", got, err)
	}
}
