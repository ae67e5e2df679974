package plugin

import (
	"encoding/json"
	"time"
)

// ProtocolVersion is the version of the plugin protocol this package speaks
// (docs/plugin-protocol.md). A plugin that answers hello with another version is refused.
const ProtocolVersion = 1

const (
	// chunkSize is the most file bytes one upload_chunk or read message carries (before
	// base64), so no single message holds a whole workspace.
	chunkSize = 1 << 20
	// outputLimit is the most bytes per stream an exec response may carry; plugins keep
	// the head and the tail and set truncated. The exact output is then read from files.
	outputLimit = 4 << 20
	// maxMessage bounds one line from the plugin: two capped streams in base64 plus room.
	// A longer line is a protocol violation and stops the plugin.
	maxMessage = 16 << 20
)

// request is one line talkops writes to the plugin's stdin.
type request struct {
	ID     int64  `json:"id"`
	Op     string `json:"op"`
	Params any    `json:"params,omitempty"`
}

// response is one line the plugin writes to its stdout: result or error, never both.
type response struct {
	ID     *int64          `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

// Error codes a plugin puts in an error response.
const (
	codeNotFound     = "not_found"
	codeNotSupported = "not_supported"
	codeInvalid      = "invalid"
	codeFailed       = "failed"
)

type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Capabilities are the optional abilities a plugin states in its hello answer.
type Capabilities struct {
	// Attach: the plugin can connect to an existing sandbox by id.
	Attach bool `json:"attach"`
	// List: the plugin can list sandboxes by label, so `talkops sandbox gc` reaps through it.
	List bool `json:"list"`
	// Snapshots: create honours a snapshot name.
	Snapshots bool `json:"snapshots"`
	// TTL: create sets a server-side lifetime from ttl_seconds.
	TTL bool `json:"ttl"`
	// CombinedOutput: exec returns stdout and stderr interleaved in stdout (the
	// SandboxBackendProtocol's execute does); talkops then separates them itself.
	CombinedOutput bool `json:"combined_output"`
}

type helloParams struct {
	Protocol   int            `json:"protocol"`
	Name       string         `json:"name"`
	WorkingDir string         `json:"working_dir,omitempty"`
	Options    map[string]any `json:"options"`
}

type helloResult struct {
	Protocol     int          `json:"protocol"`
	Name         string       `json:"name,omitempty"`
	Capabilities Capabilities `json:"capabilities"`
}

type createParams struct {
	RunID      string            `json:"run_id"`
	Labels     map[string]string `json:"labels"`
	TTLSeconds int64             `json:"ttl_seconds,omitempty"`
	Snapshot   string            `json:"snapshot,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
}

type sandboxRef struct {
	SandboxID string `json:"sandbox_id"`
}

type sandboxResult struct {
	SandboxID  string `json:"sandbox_id"`
	WorkingDir string `json:"working_dir"`
}

type execParams struct {
	SandboxID      string            `json:"sandbox_id"`
	Command        string            `json:"command"`
	Workdir        string            `json:"workdir,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutSeconds int64             `json:"timeout_seconds,omitempty"`
	OutputLimit    int               `json:"output_limit"`
}

type execResult struct {
	ExitCode  int    `json:"exit_code"`
	Stdout    []byte `json:"stdout"` // base64 in JSON
	Stderr    []byte `json:"stderr"`
	TimedOut  bool   `json:"timed_out"`
	Truncated bool   `json:"truncated"`
}

type uploadBeginParams struct {
	SandboxID string `json:"sandbox_id"`
	Path      string `json:"path"`
	// Extract: the data is a gzip tar to unpack into the directory Path; else it is
	// the content of the file Path.
	Extract bool  `json:"extract"`
	Size    int64 `json:"size"`
}

type uploadBeginResult struct {
	UploadID string `json:"upload_id"`
}

type uploadChunkParams struct {
	UploadID string `json:"upload_id"`
	Data     []byte `json:"data"`
}

type uploadRef struct {
	UploadID string `json:"upload_id"`
}

type readParams struct {
	SandboxID string `json:"sandbox_id"`
	Path      string `json:"path"`
	Offset    int64  `json:"offset"`
	Length    int    `json:"length"`
}

type readResult struct {
	Data []byte `json:"data"`
	EOF  bool   `json:"eof"`
}

type listParams struct {
	Labels map[string]string `json:"labels"`
}

type listedSandbox struct {
	ID        string            `json:"id"`
	Labels    map[string]string `json:"labels"`
	CreatedAt time.Time         `json:"created_at,omitzero"`
	State     string            `json:"state,omitempty"`
}

type listResult struct {
	Sandboxes []listedSandbox `json:"sandboxes"`
}
