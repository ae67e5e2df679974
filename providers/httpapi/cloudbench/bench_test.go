package cloudbench_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/daytona"
	"github.com/talkops/talkops/providers/daytona/daytonafake"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/langsmith"
	"github.com/talkops/talkops/providers/langsmith/langsmithfake"
	"github.com/talkops/talkops/providers/runloop"
	"github.com/talkops/talkops/providers/runloop/runloopfake"
	"github.com/talkops/talkops/providers/vercel"
	"github.com/talkops/talkops/providers/vercel/vercelfake"
	"github.com/talkops/talkops/providers/workspace"
)

const (
	treeFiles = 2000
	execs     = 10
	batchSize = 20 // the published TalkOps sync: upload_files() per batch of 20
)

// file is one project file, read into memory as the published sync does.
type file struct {
	rel  string
	body []byte
}

// project writes a deterministic 2,000-file tree: 40 directories of 50 files, sizes
// log-uniform between 100 B and 16 KiB (about 3 KiB on average), text that compresses
// like source code.
func project(b *testing.B) (string, []file) {
	b.Helper()
	root := b.TempDir()
	rng := rand.New(rand.NewChaCha8([32]byte{'t', 'a', 'l', 'k', 'o', 'p', 's'}))
	words := strings.Fields(`resource variable output module provider data locals terraform aws_instance
		aws_security_group ingress egress cidr_blocks from_port to_port protocol tags Name count
		for_each depends_on lifecycle ami instance_type subnet_id vpc_id = { } [ ] "0.0.0.0/0" 22 443 tcp`)
	var files []file
	for i := range treeFiles {
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
		files = append(files, file{rel: rel, body: body})
	}
	return root, files
}

// target is one provider wired to its fake.
type target struct {
	name string
	// setup starts the fake and returns a provider counting into stats, a baseline
	// uploader, and the fake's Close.
	setup func(b *testing.B, stats *httpapi.Stats, workDir string) (providers.Provider, baseline, func())
}

// baseline uploads files into sb's WorkDir file by file, batchSize at a time, the way the
// provider's LangChain backend upload_files() does.
type baseline func(ctx context.Context, sb providers.Sandbox, files []file) error

var fast = httpapi.Retry{Attempts: 2, Base: time.Millisecond, Max: time.Millisecond}

var targets = []target{
	{"daytona", func(b *testing.B, stats *httpapi.Stats, wd string) (providers.Provider, baseline, func()) {
		srv := daytonafake.New("k")
		srv.ReadyAfter = 2
		p, err := daytona.New(daytona.Options{APIURL: srv.APIURL(), PollInterval: time.Millisecond, RemoteOptions: httpapi.RemoteOptions{WorkingDir: wd, Stats: stats, Retry: fast}}, getenv("DAYTONA_API_KEY", "k"))
		if err != nil {
			b.Fatal(err)
		}
		c := &httpapi.Client{Provider: "daytona", Header: http.Header{"Authorization": {"Bearer k"}}, Stats: stats}
		// langchain-daytona: sandbox.fs.upload_files() = one multipart bulk-upload per batch.
		up := func(ctx context.Context, sb providers.Sandbox, files []file) error {
			var body bytes.Buffer
			mw := newMultipart(&body)
			for i, f := range files {
				mw.field(fmt.Sprintf("files[%d].path", i), path.Join(sb.WorkDir(), f.rel))
				mw.file(fmt.Sprintf("files[%d].file", i), path.Base(f.rel), f.body)
			}
			mw.close()
			return c.JSON(ctx, httpapi.Request{Method: "POST", Path: srv.URL + "/toolbox/" + sb.ID() + "/files/bulk-upload",
				Body: httpapi.BytesBody(body.Bytes(), mw.contentType())}, nil)
		}
		return p, up, srv.Close
	}},
	{"vercel", func(b *testing.B, stats *httpapi.Stats, wd string) (providers.Provider, baseline, func()) {
		srv := vercelfake.New("t", "team", "prj")
		srv.ReadyAfter = 2
		p, err := vercel.New(vercel.Options{APIURL: srv.URL, PollInterval: time.Millisecond, RemoteOptions: httpapi.RemoteOptions{WorkingDir: wd, Stats: stats, Retry: fast}},
			getenv("VERCEL_TOKEN", "t", "VERCEL_TEAM_ID", "team", "VERCEL_PROJECT_ID", "prj"))
		if err != nil {
			b.Fatal(err)
		}
		c := &httpapi.Client{Provider: "vercel", BaseURL: srv.URL, Header: http.Header{"Authorization": {"Bearer t"}}, Stats: stats}
		// The Vercel backend: sandbox.write_files() = one gzip tar per batch to fs/write.
		up := func(ctx context.Context, sb providers.Sandbox, files []file) error {
			var got struct {
				Sandbox struct {
					CurrentSessionID string `json:"currentSessionId"`
				} `json:"sandbox"`
			}
			q := url.Values{"teamId": {"team"}, "projectId": {"prj"}}
			if err := (&httpapi.Client{Provider: "vercel", BaseURL: srv.URL, Header: c.Header}).JSON(ctx, httpapi.Request{Method: "GET", Path: "v2/sandboxes/" + sb.ID(), Query: q}, &got); err != nil {
				return err
			}
			var tgz bytes.Buffer
			zw := gzip.NewWriter(&tgz)
			tw := tar.NewWriter(zw)
			for _, f := range files {
				name := strings.TrimPrefix(path.Join(sb.WorkDir(), f.rel), "/")
				if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
					return err
				}
				if _, err := tw.Write(f.body); err != nil {
					return err
				}
			}
			if err := errors.Join(tw.Close(), zw.Close()); err != nil {
				return err
			}
			return c.JSON(ctx, httpapi.Request{Method: "POST", Path: "v2/sandboxes/sessions/" + got.Sandbox.CurrentSessionID + "/fs/write",
				Query: url.Values{"teamId": {"team"}}, Header: http.Header{"X-Cwd": {"/"}}, Body: httpapi.BytesBody(tgz.Bytes(), "application/gzip")}, nil)
		}
		return p, up, srv.Close
	}},
	{"runloop", func(b *testing.B, stats *httpapi.Stats, wd string) (providers.Provider, baseline, func()) {
		srv := runloopfake.New("k")
		srv.ReadyAfter, srv.Hold = 1, time.Second
		p, err := runloop.New(runloop.Options{APIURL: srv.URL, RemoteOptions: httpapi.RemoteOptions{WorkingDir: wd, Stats: stats, Retry: fast}}, getenv("RUNLOOP_API_KEY", "k"))
		if err != nil {
			b.Fatal(err)
		}
		c := &httpapi.Client{Provider: "runloop", BaseURL: srv.URL, Header: http.Header{"Authorization": {"Bearer k"}}, Stats: stats}
		// The Runloop backend: devboxes.upload_file() once per file.
		up := func(ctx context.Context, sb providers.Sandbox, files []file) error {
			for _, f := range files {
				var body bytes.Buffer
				mw := newMultipart(&body)
				mw.field("path", path.Join(sb.WorkDir(), f.rel))
				mw.file("file", path.Base(f.rel), f.body)
				mw.close()
				if err := c.JSON(ctx, httpapi.Request{Method: "POST", Path: "v1/devboxes/" + sb.ID() + "/upload_file", Body: httpapi.BytesBody(body.Bytes(), mw.contentType())}, nil); err != nil {
					return err
				}
			}
			return nil
		}
		return p, up, srv.Close
	}},
	{"langsmith", func(b *testing.B, stats *httpapi.Stats, wd string) (providers.Provider, baseline, func()) {
		srv := langsmithfake.New("k")
		srv.ReadyAfter = 2
		p, err := langsmith.New(langsmith.Options{APIURL: srv.APIURL(), PollInterval: time.Millisecond, RemoteOptions: httpapi.RemoteOptions{WorkingDir: wd, Stats: stats, Retry: fast}}, getenv("LANGSMITH_API_KEY", "k"))
		if err != nil {
			b.Fatal(err)
		}
		c := &httpapi.Client{Provider: "langsmith", Header: http.Header{"X-Api-Key": {"k"}}, Stats: stats}
		// The LangSmith backend: sandbox.write() once per file.
		up := func(ctx context.Context, sb providers.Sandbox, files []file) error {
			for _, f := range files {
				var body bytes.Buffer
				mw := newMultipart(&body)
				mw.file("file", "file", f.body)
				mw.close()
				if err := c.JSON(ctx, httpapi.Request{Method: "POST", Path: srv.URL + "/dp/" + sb.ID() + "/upload",
					Query: url.Values{"path": {path.Join(sb.WorkDir(), f.rel)}}, Body: httpapi.BytesBody(body.Bytes(), mw.contentType())}, nil); err != nil {
					return err
				}
			}
			return nil
		}
		return p, up, srv.Close
	}},
}

func getenv(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// BenchmarkRun measures one run per iteration: create, sync, 10 execs, delete.
func BenchmarkRun(b *testing.B) {
	root, files := project(b)
	for _, tg := range targets {
		for _, mode := range []string{"archive", "batches20"} {
			b.Run(tg.name+"/"+mode, func(b *testing.B) {
				var total, sync httpapi.Counts
				var syncTime time.Duration
				for range b.N {
					stats := &httpapi.Stats{}
					p, up, closeFake := tg.setup(b, stats, b.TempDir())
					t, s, d := run(b, p, up, mode, root, files, stats)
					closeFake()
					total, sync, syncTime = add(total, t), add(sync, s), syncTime+d
				}
				n := float64(b.N)
				b.ReportMetric(float64(total.Requests)/n, "req/run")
				b.ReportMetric(float64(sync.Requests)/n, "sync-req/run")
				b.ReportMetric(float64(total.BytesSent)/n/1024, "KiB-sent/run")
				b.ReportMetric(float64(sync.BytesSent)/n/1024, "sync-KiB-sent/run")
				b.ReportMetric(float64(total.BytesReceived)/n/1024, "KiB-recv/run")
				b.ReportMetric(float64(syncTime.Milliseconds())/n, "sync-ms/run")
			})
		}
	}
}

func run(b *testing.B, p providers.Provider, up baseline, mode, root string, files []file, stats *httpapi.Stats) (total, sync httpapi.Counts, syncTime time.Duration) {
	b.Helper()
	ctx := b.Context()
	sb, err := p.Create(ctx, providers.Spec{RunID: "bench", TTL: time.Hour, Labels: map[string]string{
		providers.LabelRunID: "bench", providers.LabelCreatedBy: "talkops", providers.LabelExpiresAt: time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	}})
	if err != nil {
		b.Fatalf("%s: Create: %v", p.Name(), err)
	}
	before := stats.Snapshot()
	start := time.Now()
	if mode == "archive" {
		if _, err := workspace.Sync(ctx, sb, root, "", workspace.Options{}); err != nil {
			b.Fatalf("%s: Sync: %v", p.Name(), err)
		}
	} else {
		for i := 0; i < len(files); i += batchSize {
			if err := up(ctx, sb, files[i:min(i+batchSize, len(files))]); err != nil {
				b.Fatalf("%s: baseline batch %d: %v", p.Name(), i/batchSize, err)
			}
		}
	}
	syncTime = time.Since(start)
	sync = sub(stats.Snapshot(), before)
	for i := range execs {
		rel := files[i*(treeFiles/execs)].rel
		res, err := sb.Exec(ctx, providers.Cmd{Argv: []string{"wc", "-c", rel}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%s: Exec(wc -c %s) = exit %d, %v; stderr %s", p.Name(), rel, res.ExitCode, err, res.Stderr)
		}
		if want := fmt.Sprintf("%d %s\n", len(files[i*(treeFiles/execs)].body), rel); string(res.Stdout) != want {
			b.Fatalf("%s: the synced file differs: wc -c says %q, want %q", p.Name(), res.Stdout, want)
		}
	}
	if err := sb.Close(ctx); err != nil {
		b.Fatalf("%s: Close: %v", p.Name(), err)
	}
	return stats.Snapshot(), sync, syncTime
}

func add(a, b httpapi.Counts) httpapi.Counts {
	return httpapi.Counts{Requests: a.Requests + b.Requests, Retries: a.Retries + b.Retries, BytesSent: a.BytesSent + b.BytesSent, BytesReceived: a.BytesReceived + b.BytesReceived}
}

func sub(a, b httpapi.Counts) httpapi.Counts {
	return httpapi.Counts{Requests: a.Requests - b.Requests, Retries: a.Retries - b.Retries, BytesSent: a.BytesSent - b.BytesSent, BytesReceived: a.BytesReceived - b.BytesReceived}
}

// form is a multipart body built in memory, as the published sync builds it.
type form struct{ w *multipart.Writer }

func newMultipart(buf *bytes.Buffer) *form { return &form{w: multipart.NewWriter(buf)} }

func (f *form) field(name, value string) { _ = f.w.WriteField(name, value) }

func (f *form) file(name, filename string, body []byte) {
	w, _ := f.w.CreateFormFile(name, filename)
	_, _ = w.Write(body)
}

func (f *form) close() { _ = f.w.Close() }

func (f *form) contentType() string { return f.w.FormDataContentType() }
