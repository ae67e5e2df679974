// Package prompt resolves the agent's prompt from where a user may give it: a flag, the
// positional words, a file, and piped stdin.
package prompt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/talkops/talkops/internal/fileread"
	"github.com/talkops/talkops/runner"
)

// maxStdin caps piped stdin, as TalkOps does, and --prompt-file.
const maxStdin = 10 << 20

// ReadFile reads --prompt-file: a regular file within the stdin limit.
func ReadFile(path string) ([]byte, error) { return fileread.Read(path, maxStdin) }

// stdinGrace is how long a run that already has a prompt waits for the first byte on a
// pipe that is open but silent (some CI agents leave one attached): long enough for a
// real producer, short enough not to stall every job.
const stdinGrace = time.Second

// Input is where the prompt may come from.
type Input struct {
	Flag       string // -p/--prompt or -n
	Positional []string
	File       string // --prompt-file (a path, or - for stdin)
	ReadFile   func(string) ([]byte, error)
	Stdin      io.Reader
}

// Resolve builds the prompt: exactly one of -p/-n, the positional words or
// --prompt-file, with piped stdin prepended ("stdin\n\nprompt"). An empty prompt is
// "no prompt". Every problem is a usage error.
func Resolve(in Input) (string, error) {
	sources := 0
	var prompt string
	if in.Flag != "" {
		sources++
		prompt = in.Flag
	}
	if len(in.Positional) > 0 {
		sources++
		prompt = strings.Join(in.Positional, " ")
	}
	fromStdin := in.File == "-"
	if in.File != "" && !fromStdin {
		sources++
		data, err := in.ReadFile(in.File)
		if err != nil {
			return "", runner.Usagef("--prompt-file: %v", err)
		}
		prompt = string(data)
	}
	if sources > 1 || (fromStdin && sources > 0) {
		return "", runner.Usagef("give the prompt once: -p/--prompt, -n, a positional argument or --prompt-file")
	}
	piped, err := readStdin(in.Stdin, sources > 0, fromStdin)
	if err != nil {
		return "", err
	}
	if in.Flag != "" && strings.TrimSpace(in.Flag) == "" {
		return "", runner.Usagef("-p/--prompt is empty")
	}
	switch {
	case strings.TrimSpace(piped) == "":
		return prompt, nil
	case strings.TrimSpace(prompt) == "":
		return piped, nil
	}
	return strings.TrimRight(piped, "\n") + "\n\n" + prompt, nil
}

// readStdin returns what was piped in. A terminal or /dev/null (a character device) is
// never read. A pipe is read to the end; when a prompt was given some other way, a pipe
// that stays silent for stdinGrace is left alone instead of hanging the run.
func readStdin(r io.Reader, havePrompt, required bool) (string, error) {
	if r == nil {
		return "", nil
	}
	if f, ok := r.(*os.File); ok {
		fi, err := f.Stat()
		if err != nil || fi.Mode()&os.ModeCharDevice != 0 {
			if required {
				return "", runner.Usagef("--prompt-file -: stdin is a terminal or not readable; pipe the prompt in")
			}
			return "", nil
		}
		if fi.Mode()&os.ModeNamedPipe != 0 && havePrompt && !required {
			return readWithGrace(f)
		}
	}
	return readCapped(r)
}

func readCapped(r io.Reader) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxStdin+1))
	if err != nil {
		return "", fmt.Errorf("read stdin: %w", err)
	}
	if len(data) > maxStdin {
		return "", runner.Usagef("stdin exceeds the 10 MiB limit for a piped prompt")
	}
	return string(data), nil
}

// readWithGrace reads a pipe to EOF unless nothing at all arrives within stdinGrace.
func readWithGrace(f *os.File) (string, error) {
	type chunk struct {
		data []byte
		err  error
	}
	first := make(chan chunk, 1)
	go func() {
		buf := make([]byte, 64<<10)
		n, err := f.Read(buf)
		first <- chunk{buf[:n], err}
	}()
	select {
	case c := <-first:
		if c.err != nil && !errors.Is(c.err, io.EOF) {
			return "", fmt.Errorf("read stdin: %w", c.err)
		}
		if errors.Is(c.err, io.EOF) {
			return string(c.data), nil
		}
		rest, err := readCapped(io.MultiReader(bytes.NewReader(c.data), f))
		return rest, err
	case <-time.After(stdinGrace):
		// The reader goroutine stays blocked on the silent pipe until the process exits;
		// nothing else reads stdin.
		return "", nil
	}
}
