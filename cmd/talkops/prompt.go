package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/talkops/talkops/internal/fileread"
)

// maxStdin caps piped stdin, as TalkOps does, and --prompt-file.
const maxStdin = 10 << 20

// readPromptFile reads --prompt-file: a regular file within the stdin limit.
func readPromptFile(path string) ([]byte, error) { return fileread.Read(path, maxStdin) }

// stdinGrace is how long a run that already has a prompt waits for the first byte on a
// pipe that is open but silent (some CI agents leave one attached): long enough for a
// real producer, short enough not to stall every job.
const stdinGrace = time.Second

// promptInput is where the prompt may come from.
type promptInput struct {
	flag       string // -p/--prompt or -n
	positional []string
	file       string // --prompt-file (a path, or - for stdin)
	readFile   func(string) ([]byte, error)
	stdin      io.Reader
}

// resolvePrompt builds the prompt: exactly one of -p/-n, the positional words or
// --prompt-file, with piped stdin prepended ("stdin\n\nprompt"). An empty prompt is
// "no prompt". Every problem is a usage error.
func resolvePrompt(in promptInput) (string, error) {
	sources := 0
	var prompt string
	if in.flag != "" {
		sources++
		prompt = in.flag
	}
	if len(in.positional) > 0 {
		sources++
		prompt = strings.Join(in.positional, " ")
	}
	fromStdin := in.file == "-"
	if in.file != "" && !fromStdin {
		sources++
		data, err := in.readFile(in.file)
		if err != nil {
			return "", usagef("--prompt-file: %v", err)
		}
		prompt = string(data)
	}
	if sources > 1 || (fromStdin && sources > 0) {
		return "", usagef("give the prompt once: -p/--prompt, -n, a positional argument or --prompt-file")
	}
	piped, err := readStdin(in.stdin, sources > 0, fromStdin)
	if err != nil {
		return "", err
	}
	if in.flag != "" && strings.TrimSpace(in.flag) == "" {
		return "", usagef("-p/--prompt is empty")
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
				return "", usagef("--prompt-file -: stdin is a terminal or not readable; pipe the prompt in")
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
		return "", usagef("stdin exceeds the 10 MiB limit for a piped prompt")
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
