package agentcore_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore/types"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/agentcore"
	"github.com/talkops/talkops/providers/agentcore/agentcorefake"
	"github.com/talkops/talkops/providers/workspace"
)

// The run the cloud-provider benchmarks measure (see BENCHMARKS.md, "Cloud providers"):
// create, sync a 2,000-file project, 10 execs, delete.
const (
	benchFiles = 2000
	benchExecs = 10
	batchSize  = 20 // the published TalkOps sync: upload_files() per batch of 20
)

type benchFile struct {
	rel  string
	body []byte
}

// benchProject writes the same deterministic tree as providers/httpapi/cloudbench: 40
// directories of 50 files, sizes log-uniform between 100 B and 16 KiB, text that
// compresses like source code.
func benchProject(b *testing.B) (string, []benchFile) {
	b.Helper()
	root := b.TempDir()
	rng := rand.New(rand.NewChaCha8([32]byte{'t', 'a', 'l', 'k', 'o', 'p', 's'}))
	words := strings.Fields(`resource variable output module provider data locals terraform aws_instance
		aws_security_group ingress egress cidr_blocks from_port to_port protocol tags Name count
		for_each depends_on lifecycle ami instance_type subnet_id vpc_id = { } [ ] "0.0.0.0/0" 22 443 tcp`)
	var files []benchFile
	for i := range benchFiles {
		rel := fmt.Sprintf("modules/m%02d/f%03d.tf", i/50, i%50)
		size := int(100 * math.Pow(160, rng.Float64()))
		var buf bytes.Buffer
		for buf.Len() < size {
			buf.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(8) == 0 {
				buf.WriteByte('\n')
			} else {
				buf.WriteByte(' ')
			}
		}
		body := buf.Bytes()[:size]
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), body, 0o644); err != nil {
			b.Fatal(err)
		}
		files = append(files, benchFile{rel: rel, body: body})
	}
	return root, files
}

// counts sums the fake's record of calls: every HTTP attempt, and body bytes each way
// (headers not counted).
type counts struct{ requests, sent, received int64 }

func tally(calls []agentcorefake.Call) counts {
	var c counts
	for _, call := range calls {
		c.requests++
		c.sent += call.RequestBytes
		c.received += call.ResponseBytes
	}
	return c
}

func (c counts) add(o counts) counts {
	return counts{c.requests + o.requests, c.sent + o.sent, c.received + o.received}
}

// BenchmarkRun measures one run per iteration against the fake: create, sync, 10 execs,
// delete. "archive" is talkops (workspace.Sync into Upload: the gzip tar as writeFiles
// blobs plus one tar exec); "batches20" is the published TalkOps sync through the
// LangChain AgentCore backend, whose upload_files() sends one writeFiles call per batch
// with each file as a text block, 20 files at a time.
//
//	go test -run '^$' -bench . -benchtime 3x ./providers/agentcore/
func BenchmarkRun(b *testing.B) {
	root, files := benchProject(b)
	for _, mode := range []string{"archive", "batches20"} {
		b.Run(mode, func(b *testing.B) {
			var total, sync counts
			var syncTime time.Duration
			for range b.N {
				t, s, d := benchRun(b, mode, root, files)
				total, sync, syncTime = total.add(t), sync.add(s), syncTime+d
			}
			n := float64(b.N)
			b.ReportMetric(float64(total.requests)/n, "req/run")
			b.ReportMetric(float64(sync.requests)/n, "sync-req/run")
			b.ReportMetric(float64(total.sent)/n/1024, "KiB-sent/run")
			b.ReportMetric(float64(sync.sent)/n/1024, "sync-KiB-sent/run")
			b.ReportMetric(float64(total.received)/n/1024, "KiB-recv/run")
			b.ReportMetric(float64(syncTime.Milliseconds())/n, "sync-ms/run")
		})
	}
}

func benchRun(b *testing.B, mode, root string, files []benchFile) (total, sync counts, syncTime time.Duration) {
	b.Helper()
	ctx := b.Context()
	srv := agentcorefake.New(accessKey)
	defer srv.Close()
	creds := credentials.NewStaticCredentialsProvider(accessKey, "secret", "")
	p, err := agentcore.New(agentcore.Options{Endpoint: srv.URL, Region: "us-west-2", Credentials: creds,
		WorkingDir: b.TempDir(), PollInterval: time.Millisecond}, env())
	if err != nil {
		b.Fatal(err)
	}
	sb, err := p.Create(ctx, providers.Spec{RunID: "bench", TTL: time.Hour, Labels: map[string]string{
		providers.LabelRunID: "bench", providers.LabelCreatedBy: "talkops", providers.LabelExpiresAt: time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	}})
	if err != nil {
		b.Fatalf("Create: %v", err)
	}
	before := len(srv.Calls())
	dir := sb.WorkDir()
	start := time.Now()
	if mode == "archive" {
		if _, err := workspace.Sync(ctx, sb, root, "", workspace.Options{}); err != nil {
			b.Fatalf("Sync: %v", err)
		}
	} else {
		// The LangChain backend strips the leading "/" and lets AgentCore resolve the
		// path against the session's working directory.
		dir = path.Join(agentcore.Home(sb), "proj")
		c := bedrockagentcore.New(bedrockagentcore.Options{Region: "us-west-2", BaseEndpoint: &srv.URL, Credentials: creds})
		for i := 0; i < len(files); i += batchSize {
			var content []types.InputContentBlock
			for _, f := range files[i:min(i+batchSize, len(files))] {
				content = append(content, types.InputContentBlock{Path: aws.String("proj/" + f.rel), Text: aws.String(string(f.body))})
			}
			out, err := c.InvokeCodeInterpreter(ctx, &bedrockagentcore.InvokeCodeInterpreterInput{
				CodeInterpreterIdentifier: aws.String(agentcore.DefaultCodeInterpreter), SessionId: aws.String(sb.ID()),
				Name: types.ToolNameWriteFiles, Arguments: &types.ToolArguments{Content: content}})
			if err != nil {
				b.Fatalf("baseline batch %d: %v", i/batchSize, err)
			}
			for range out.GetStream().Events() {
			}
			if err := out.GetStream().Close(); err != nil {
				b.Fatalf("baseline batch %d: %v", i/batchSize, err)
			}
		}
	}
	syncTime = time.Since(start)
	sync = tally(srv.Calls()[before:])
	for i := range benchExecs {
		f := files[i*(benchFiles/benchExecs)]
		res, err := sb.Exec(ctx, providers.Cmd{Argv: []string{"wc", "-c", f.rel}, Dir: dir})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Exec(wc -c %s) = exit %d, %v; stderr %s", f.rel, res.ExitCode, err, res.Stderr)
		}
		if want := fmt.Sprintf("%d %s\n", len(f.body), f.rel); string(res.Stdout) != want {
			b.Fatalf("the synced file differs: wc -c says %q, want %q", res.Stdout, want)
		}
	}
	if err := sb.Close(ctx); err != nil {
		b.Fatalf("Close: %v", err)
	}
	return tally(srv.Calls()), sync, syncTime
}
