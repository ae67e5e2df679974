package result

import (
	"encoding/json"
	"time"
)

// Command is one command the agent ran in the sandbox: the record the agent keeps (its
// output redacted, each stream cut to head and tail) and the judge reads as evidence.
// The agent's tools fill the exec fields from the sandbox's raw providers.ExecResult;
// the agent adds Pass, Turn and OutputFile.
type Command struct {
	// Pass is the 1-based agent pass (Run, then each Revise) that ran the command.
	Pass int
	// Turn is the model turn that asked for it.
	Turn int
	// Command is the shell string the agent sent ("" when it gave Argv only).
	Command  string
	Argv     []string
	ExitCode int
	TimedOut bool
	Stdout   string
	Stderr   string
	Duration time.Duration
	// Truncated is set when only the head and tail of a stream were kept (by the sandbox
	// or by the agent); the whole output is in OutputFile when that is set.
	Truncated  bool
	OutputFile string
}

// commandJSON is Command's JSON form: durations in milliseconds, as everywhere in
// talkops' JSON.
type commandJSON struct {
	Pass       int      `json:"pass,omitempty"`
	Turn       int      `json:"turn"`
	Command    string   `json:"command"`
	Argv       []string `json:"argv"`
	ExitCode   int      `json:"exit_code"`
	TimedOut   bool     `json:"timed_out,omitempty"`
	Stdout     string   `json:"stdout"`
	Stderr     string   `json:"stderr"`
	Truncated  bool     `json:"output_truncated,omitempty"`
	OutputFile string   `json:"output_file,omitempty"`
	DurationMS int64    `json:"duration_ms"`
}

// MarshalJSON writes the duration as duration_ms.
func (c Command) MarshalJSON() ([]byte, error) {
	return json.Marshal(commandJSON{
		Pass: c.Pass, Turn: c.Turn, Command: c.Command, Argv: c.Argv, ExitCode: c.ExitCode, TimedOut: c.TimedOut,
		Stdout: c.Stdout, Stderr: c.Stderr, Truncated: c.Truncated, OutputFile: c.OutputFile, DurationMS: c.Duration.Milliseconds(),
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Command) UnmarshalJSON(data []byte) error {
	var j commandJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*c = Command{
		Pass: j.Pass, Turn: j.Turn, Command: j.Command, Argv: j.Argv, ExitCode: j.ExitCode, TimedOut: j.TimedOut,
		Stdout: j.Stdout, Stderr: j.Stderr, Truncated: j.Truncated, OutputFile: j.OutputFile,
		Duration: time.Duration(j.DurationMS) * time.Millisecond,
	}
	return nil
}
