package agentcore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore/schemas"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore/types"
	"github.com/aws/smithy-go/transport/http/protocol/restjson1"

	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/remote"
)

// scratchDir holds the provider's own files, relative to the session's working directory:
// staged uploads and downloads, remote's command files, and the run-once guards.
const scratchDir = ".talkops"

// duplicateExit is the exit status of a command whose run-once guard already existed.
const duplicateExit = 197

// ErrDuplicateDelivery is returned by Exec when AgentCore received the same command twice:
// the SDK retried a request whose first delivery ran but was not answered. The command
// ran once; its result is lost.
var ErrDuplicateDelivery = errors.New("AgentCore received the command a second time after failing to answer the first delivery; it ran once and its result was lost")

// driver is remote.Driver over one session's InvokeCodeInterpreter tools.
type driver struct {
	p  *Provider
	id string
	// home is the session's working directory: relative file-tool paths resolve there.
	home string
}

var _ remote.TarUploader = (*driver)(nil)

// toolResult is what an invocation's result events carried, joined.
type toolResult struct {
	stdout, stderr []byte
	exitCode       int
	hasExit        bool
	isError        bool
	texts          []string
	resources      []types.ResourceContent
}

func (r *toolResult) add(v types.CodeInterpreterResult) {
	if v.IsError != nil && *v.IsError {
		r.isError = true
	}
	if sc := v.StructuredContent; sc != nil {
		r.stdout = append(r.stdout, aws.ToString(sc.Stdout)...)
		r.stderr = append(r.stderr, aws.ToString(sc.Stderr)...)
		if sc.ExitCode != nil {
			r.exitCode, r.hasExit = int(*sc.ExitCode), true
		}
	}
	for _, c := range v.Content {
		if c.Text != nil {
			r.texts = append(r.texts, *c.Text)
		}
		if c.Resource != nil {
			r.resources = append(r.resources, *c.Resource)
		}
	}
}

func (r *toolResult) text() string { return clip([]byte(strings.Join(r.texts, "\n")), 2000) }

// invoke calls one tool and reads its event stream to the end.
func (d *driver) invoke(ctx context.Context, tool types.ToolName, args *types.ToolArguments) (toolResult, error) {
	op := "InvokeCodeInterpreter " + string(tool)
	out, err := d.p.client.InvokeCodeInterpreter(ctx, &bedrockagentcore.InvokeCodeInterpreterInput{
		CodeInterpreterIdentifier: aws.String(d.p.opts.CodeInterpreter),
		SessionId:                 aws.String(d.id),
		Name:                      tool,
		Arguments:                 args,
	}, ownProtocol)
	if err != nil {
		if ctx.Err() != nil {
			return toolResult{}, fmt.Errorf("%s: %w", op, ctx.Err())
		}
		return toolResult{}, apiError(op, err)
	}
	stream := out.GetStream()
	defer stream.Close()
	var res toolResult
	results := 0
	events := stream.Events()
	for done := false; !done; {
		select {
		case ev, ok := <-events:
			if !ok {
				done = true
				break
			}
			if r, ok := ev.(*types.CodeInterpreterStreamOutputMemberResult); ok {
				res.add(r.Value)
				results++
			}
		case <-ctx.Done():
			return toolResult{}, fmt.Errorf("%s: %w", op, ctx.Err())
		}
	}
	if err := firstErr(stream.Err(), stream.Reader.Err()); err != nil {
		if ctx.Err() != nil {
			return toolResult{}, fmt.Errorf("%s: %w", op, ctx.Err())
		}
		return toolResult{}, apiError(op, err)
	}
	if results == 0 {
		return toolResult{}, fmt.Errorf("%s: the event stream ended without a result", op)
	}
	return res, nil
}

// ownProtocol gives one invocation its own protocol instance. The SDK's restJson1
// protocol keeps event-stream decoding state in one codec shared by every stream of a
// client, unsynchronized (aws/smithy-go#714): two streams open at once (a command and the
// kill of another, or concurrent Execs) race on it.
func ownProtocol(o *bedrockagentcore.Options) {
	o.Protocol = restjson1.New(schemas.AmazonBedrockAgentCore)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// execute runs a command with executeCommand, without the run-once guard.
func (d *driver) execute(ctx context.Context, command string) (toolResult, error) {
	res, err := d.invoke(ctx, types.ToolNameExecuteCommand, &types.ToolArguments{Command: aws.String(command)})
	if err != nil {
		return res, err
	}
	if !res.hasExit {
		return res, fmt.Errorf("InvokeCodeInterpreter executeCommand: the result has no exit code (isError %v): %s", res.isError, res.text())
	}
	return res, nil
}

// Run runs a script with `sh -c`. The script first creates a guard directory named by a
// fresh nonce: a second delivery of the same request (the SDK retrying after the service
// ran the first but failed to answer) finds it and stops, so no command runs twice.
func (d *driver) Run(ctx context.Context, r remote.Run) (remote.Result, error) {
	parent := path.Join(d.home, scratchDir, "once")
	guard := path.Join(parent, nonce())
	marker := "talkops: duplicate delivery of " + path.Base(guard)
	script := fmt.Sprintf("mkdir -p -- %s 2>/dev/null; if ! mkdir -- %s 2>/dev/null && [ -d %s ]; then printf '%%s\\n' %s >&2; exit %d; fi\n",
		remote.Quote(parent), remote.Quote(guard), remote.Quote(guard), remote.Quote(marker), duplicateExit) + r.Script
	res, err := d.execute(ctx, "sh -c "+remote.Quote(script))
	if err != nil {
		return remote.Result{}, err
	}
	if res.exitCode == duplicateExit && strings.TrimSpace(string(res.stderr)) == marker {
		return remote.Result{}, fmt.Errorf("agentcore: session %s: %w", d.id, ErrDuplicateDelivery)
	}
	return remote.Result{Stdout: res.stdout, Stderr: res.stderr, ExitCode: res.exitCode}, nil
}

// rel returns p relative to the session's working directory, if it lies inside it.
func (d *driver) rel(p string) (string, bool) {
	p = path.Clean(p)
	if d.home == "/" {
		return p[1:], p != "/"
	}
	r, ok := strings.CutPrefix(p, d.home+"/")
	return r, ok && r != ""
}

// writeParts sends body with writeFiles: as rel when it fits one request, else as parts
// rel.000, rel.001, … of at most Options.UploadChunk bytes each. It returns the names
// written, relative to the working directory.
func (d *driver) writeParts(ctx context.Context, rel string, body *httpapi.Body) ([]string, error) {
	rc, err := body.Open()
	if err != nil {
		return nil, fmt.Errorf("open the body: %w", err)
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	size := d.p.opts.UploadChunk
	if body.Size >= 0 && body.Size < int64(size) {
		size = int(body.Size)
	}
	buf := make([]byte, size)
	var parts []string
	for i := 0; ; i++ {
		n, err := io.ReadFull(br, buf)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return parts, fmt.Errorf("read the body: %w", err)
		}
		_, err = br.Peek(1)
		last := errors.Is(err, io.EOF)
		if err != nil && !last {
			return parts, fmt.Errorf("read the body: %w", err)
		}
		name := rel
		if i > 0 || !last {
			name = fmt.Sprintf("%s.%03d", rel, i)
		}
		res, err := d.invoke(ctx, types.ToolNameWriteFiles, &types.ToolArguments{
			Content: []types.InputContentBlock{{Path: aws.String(name), Blob: buf[:n]}}})
		if err != nil {
			return parts, err
		}
		if res.isError {
			return parts, fmt.Errorf("InvokeCodeInterpreter writeFiles %s: %s", name, res.text())
		}
		parts = append(parts, name)
		if last {
			return parts, nil
		}
		if len(buf) < d.p.opts.UploadChunk {
			// The body is longer than its stated size: read on in whole chunks.
			buf = make([]byte, d.p.opts.UploadChunk)
		}
	}
}

// abs returns the absolute path of a name relative to the working directory.
func (d *driver) abs(rel string) string { return path.Join(d.home, rel) }

func (d *driver) quoteAll(rels []string) string {
	q := make([]string, len(rels))
	for i, r := range rels {
		q[i] = remote.Quote(d.abs(r))
	}
	return strings.Join(q, " ")
}

// removeQuietly deletes scratch files, best effort, on a context that outlives a cancel.
func (d *driver) removeQuietly(ctx context.Context, rels []string) {
	if len(rels) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	_, _ = d.execute(ctx, "rm -f -- "+d.quoteAll(rels))
}

// WriteFile writes body to the absolute path p. A path inside the working directory is
// written directly; any other is staged there and moved with one command.
func (d *driver) WriteFile(ctx context.Context, p string, body *httpapi.Body) error {
	rel, inside := d.rel(p)
	if !inside {
		rel = path.Join(scratchDir, "stage-"+nonce())
	}
	parts, err := d.writeParts(ctx, rel, body)
	if err != nil {
		d.removeQuietly(ctx, parts)
		return err
	}
	if inside && len(parts) == 1 {
		return nil
	}
	var script strings.Builder
	if len(parts) > 1 {
		fmt.Fprintf(&script, "cat -- %s > %s || exit 1\nrm -f -- %s\n", d.quoteAll(parts), remote.Quote(d.abs(rel)), d.quoteAll(parts))
	}
	if !inside {
		fmt.Fprintf(&script, "mkdir -p -- %s && mv -f -- %s %s\n", remote.Quote(path.Dir(p)), remote.Quote(d.abs(rel)), remote.Quote(p))
	}
	res, err := d.execute(ctx, "sh -c "+remote.Quote(script.String()))
	if err == nil && res.exitCode != 0 {
		err = fmt.Errorf("move the written file into place exited %d: %s", res.exitCode, clip(res.stderr, 2000))
	}
	if err != nil {
		d.removeQuietly(ctx, append(parts, rel))
	}
	return err
}

// UploadTarGz sends the archive with writeFiles (one request per Options.UploadChunk
// bytes) and extracts it into dir with one executeCommand.
func (d *driver) UploadTarGz(ctx context.Context, dir string, body *httpapi.Body) error {
	rel := path.Join(scratchDir, "upload-"+nonce()+".tgz")
	parts, err := d.writeParts(ctx, rel, body)
	if err != nil {
		d.removeQuietly(ctx, parts)
		return err
	}
	files := d.quoteAll(parts)
	extract := "tar -xzf " + files
	if len(parts) > 1 {
		extract = "cat -- " + files + " | tar -xzf -"
	}
	q := remote.Quote(dir)
	script := "mkdir -p -- " + q + " || exit 1\n" +
		extract + " -C " + q + " --no-same-owner\n" +
		"rc=$?\nrm -f -- " + files + "\nexit $rc\n"
	res, err := d.execute(ctx, "sh -c "+remote.Quote(script))
	if err != nil {
		d.removeQuietly(ctx, parts)
		return fmt.Errorf("extract: %w", err)
	}
	if res.exitCode != 0 {
		msg := res.stderr
		if len(msg) == 0 {
			msg = res.stdout
		}
		return fmt.Errorf("tar -xzf into %s exited %d: %s", dir, res.exitCode, clip(msg, 2000))
	}
	return nil
}

// ReadFile reads the file at the absolute path p with readFiles. A file outside the
// working directory is copied into it first (and the copy removed after).
func (d *driver) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	rel, inside := d.rel(p)
	if !inside {
		rel = path.Join(scratchDir, "dl-"+nonce())
		script := fmt.Sprintf("[ -e %[1]s ] || exit 3\n[ -f %[1]s ] || exit 4\ncp -- %[1]s %[2]s\n", remote.Quote(p), remote.Quote(d.abs(rel)))
		res, err := d.execute(ctx, "sh -c "+remote.Quote(script))
		switch {
		case err != nil:
			return nil, err
		case res.exitCode == 3:
			return nil, fmt.Errorf("no such file: %w", fs.ErrNotExist)
		case res.exitCode == 4:
			return nil, errors.New("not a regular file")
		case res.exitCode != 0:
			return nil, fmt.Errorf("copy for readFiles exited %d: %s", res.exitCode, clip(res.stderr, 2000))
		}
		defer d.removeQuietly(ctx, []string{rel})
	}
	data, err := d.readFile(ctx, rel)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// readFile reads one file relative to the working directory.
func (d *driver) readFile(ctx context.Context, rel string) ([]byte, error) {
	res, err := d.invoke(ctx, types.ToolNameReadFiles, &types.ToolArguments{Paths: []string{rel}})
	if err != nil {
		return nil, err
	}
	for _, rc := range res.resources {
		switch {
		case rc.Blob != nil:
			return rc.Blob, nil
		case rc.Text != nil && strings.ContainsRune(*rc.Text, '\uFFFD'):
			// Possibly bytes that are not UTF-8, replaced on the way: read them exactly.
			return d.readBase64(ctx, rel)
		case rc.Text != nil:
			return []byte(*rc.Text), nil
		default:
			return []byte{}, nil
		}
	}
	// No content: tell a missing file from another failure.
	q := remote.Quote(d.abs(rel))
	chk, cerr := d.execute(ctx, "sh -c "+remote.Quote("[ -e "+q+" ] || exit 3\n[ -f "+q+" ] || exit 4\n"))
	switch {
	case cerr == nil && chk.exitCode == 3:
		return nil, fmt.Errorf("no such file (readFiles: %s): %w", res.text(), fs.ErrNotExist)
	case cerr == nil && chk.exitCode == 4:
		return nil, errors.New("not a regular file")
	}
	return nil, fmt.Errorf("InvokeCodeInterpreter readFiles %s returned no file: %s", rel, res.text())
}

// readBase64 reads a file exactly through base64 on stdout.
func (d *driver) readBase64(ctx context.Context, rel string) ([]byte, error) {
	res, err := d.execute(ctx, "sh -c "+remote.Quote("base64 < "+remote.Quote(d.abs(rel))))
	if err != nil {
		return nil, err
	}
	if res.exitCode != 0 {
		return nil, fmt.Errorf("base64 of %s exited %d: %s", rel, res.exitCode, clip(res.stderr, 2000))
	}
	data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(res.stdout)), ""))
	if err != nil {
		return nil, fmt.Errorf("decode the base64 of %s: %w", rel, err)
	}
	return data, nil
}

// Delete stops the session.
func (d *driver) Delete(ctx context.Context) error { return d.p.Delete(ctx, d.id) }

// nonce returns 16 random hex digits.
func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
