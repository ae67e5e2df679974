package fakekit

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFaults(t *testing.T) {
	var f Faults
	f.Inject("create", 2, Fault{Status: 503})
	var got []int
	for range 3 {
		fl, ok := f.Hit("create")
		if ok {
			got = append(got, fl.Status)
		} else {
			got = append(got, 0)
		}
	}
	if want := []int{0, 503, 0}; !slices.Equal(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	f.InjectAll("delete", Fault{Status: 500})
	for range 2 {
		if _, ok := f.Hit("delete"); !ok {
			t.Error("InjectAll fault missing")
		}
	}
	f.Clear("delete")
	if _, ok := f.Hit("delete"); ok {
		t.Error("fault still injected after Clear")
	}
	if n := f.Calls("delete"); n != 3 {
		t.Errorf("Calls(delete) = %d, want 3", n)
	}
}

func TestRunTimeoutAndExitCodes(t *testing.T) {
	var p Procs
	home := t.TempDir()
	o := p.Run(t.Context(), Command{Path: "/bin/sh", Args: []string{"-c", "echo out; echo err >&2; exit 7"}, Env: BaseEnv(home)})
	if string(o.Stdout) != "out\n" || string(o.Stderr) != "err\n" || o.ExitCode != 7 {
		t.Errorf("Run = %+v, want out/err/7", o)
	}
	o = p.Run(t.Context(), Command{Path: "/bin/sh", Args: []string{"-c", "echo $HOME; echo $FAKEKIT_SANDBOX | wc -c"}, Env: BaseEnv(home), Combined: true})
	if lines := strings.Split(strings.TrimSpace(string(o.Stdout)), "\n"); len(lines) != 2 || lines[0] != home || strings.TrimSpace(lines[1]) != "17" {
		t.Errorf("combined output = %q, want HOME and a 16-character marker", o.Stdout)
	}
	start := time.Now()
	o = p.Run(t.Context(), Command{Path: "/bin/sh", Args: []string{"-c", "sleep 30"}, Timeout: 100 * time.Millisecond})
	if !o.TimedOut || time.Since(start) > 5*time.Second {
		t.Errorf("Run(sleep 30, timeout 100ms) = %+v after %v, want TimedOut promptly", o, time.Since(start))
	}
}

func TestKillAllReachesOtherProcessGroups(t *testing.T) {
	var p Procs
	dir := t.TempDir()
	beat := filepath.Join(dir, "beat")
	done := make(chan Outcome, 1)
	go func() {
		// setsid-like escape: the loop runs in its own process group via `timeout`.
		done <- p.Run(context.Background(), Command{Path: "/bin/sh", Args: []string{"-c",
			"timeout 60 sh -c 'while :; do echo x >> " + beat + "; sleep 0.1; done' & wait"}, Env: BaseEnv(dir)})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(beat); err == nil && fi.Size() > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.KillAll()
	select {
	case o := <-done:
		if !o.Killed {
			t.Errorf("Outcome.Killed = false after KillAll")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after KillAll")
	}
	fi1, _ := os.Stat(beat)
	time.Sleep(400 * time.Millisecond)
	fi2, _ := os.Stat(beat)
	if fi2.Size() != fi1.Size() {
		t.Errorf("heartbeat grew from %d to %d after KillAll: a process in another group survived", fi1.Size(), fi2.Size())
	}
	if o := p.Run(t.Context(), Command{Path: "/bin/true"}); o.StartErr == nil {
		t.Error("Run after KillAll started a command")
	}
}

func TestFaultAnswer(t *testing.T) {
	errorBody := func(w http.ResponseWriter, status int) {
		WriteJSON(w, status, map[string]string{"own": http.StatusText(status)})
	}
	for _, tc := range []struct {
		name       string
		fault      Fault
		wantStatus int
		wantBody   string
		wantHeader http.Header
	}{
		{"OwnBody", Fault{Status: 503}, 503, `{"own":"Service Unavailable"}` + "\n", http.Header{"Content-Type": {"application/json"}}},
		{"GivenBody", Fault{Status: 429, RetryAfter: "0", Body: `{"x":1}`, Header: map[string]string{"X-Limit": "5"}}, 429, `{"x":1}`,
			http.Header{"Content-Type": {"application/json"}, "Retry-After": {"0"}, "X-Limit": {"5"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fs Faults
			if rec := httptest.NewRecorder(); fs.Answer(rec, "create", errorBody) {
				t.Fatalf("Answer without a fault answered %d", rec.Code)
			}
			fs.Inject("create", 2, tc.fault)
			rec := httptest.NewRecorder()
			if !fs.Answer(rec, "create", errorBody) {
				t.Fatal("Answer(second call) = false, want the injected fault")
			}
			if rec.Code != tc.wantStatus || rec.Body.String() != tc.wantBody {
				t.Errorf("answer = %d %q, want %d %q", rec.Code, rec.Body, tc.wantStatus, tc.wantBody)
			}
			if diff := cmp.Diff(tc.wantHeader, rec.Header()); diff != "" {
				t.Errorf("headers mismatch (-want +got):\n%s", diff)
			}
			if n := fs.Calls("create"); n != 2 {
				t.Errorf("Calls(create) = %d, want 2", n)
			}
		})
	}
}

func TestLogHandler(t *testing.T) {
	var l Log
	srv := httptest.NewServer(l.Handler(func(w http.ResponseWriter, r *http.Request) string {
		switch r.URL.Path {
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			WriteJSON(w, http.StatusCreated, string(b))
			return "echo"
		case "/silent":
			return "silent"
		}
		w.WriteHeader(http.StatusNotFound)
		w.WriteHeader(http.StatusTeapot) // superfluous: the client saw the 404
		return "unknown"
	}))
	defer srv.Close()
	for _, p := range []string{"/echo", "/silent", "/nope"} {
		resp, err := http.Post(srv.URL+p, "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := []Call{
		{Endpoint: "echo", Method: "POST", Path: "/echo", Status: 201, RequestBytes: 5, ResponseBytes: int64(len(`"hello"` + "\n"))},
		{Endpoint: "silent", Method: "POST", Path: "/silent", Status: 200},
		{Endpoint: "unknown", Method: "POST", Path: "/nope", Status: 404},
	}
	if diff := cmp.Diff(want, l.Calls()); diff != "" {
		t.Errorf("Calls() mismatch (-want +got):\n%s", diff)
	}
	if n := l.Count("echo"); n != 1 {
		t.Errorf("Count(echo) = %d, want 1", n)
	}
}

func TestBoxes(t *testing.T) {
	var bs Boxes[string]
	bs.Add("a", "box a")
	bs.Add("b", "box b")
	bs.Add("c", "box c")
	if !bs.Delete("b") || bs.Delete("b") || bs.Delete("x") {
		t.Error("Delete(b) twice and Delete(x) = not once true, want true, false, false")
	}
	if b, ok := bs.Get("a"); !ok || b != "box a" {
		t.Errorf("Get(a) = %q, %v", b, ok)
	}
	if _, ok := bs.Get("b"); ok {
		t.Error("Get(deleted) found it")
	}
	if diff := cmp.Diff([]string{"box a", "box c"}, bs.Live()); diff != "" {
		t.Errorf("Live() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Ledger{Created: 3, Deleted: 1, Alive: []string{"a", "c"}}, bs.Ledger()); diff != "" {
		t.Errorf("Ledger() mismatch (-want +got):\n%s", diff)
	}
}

// TestLogArrivalOrder: a call keeps the place it arrived in while it is served, so a
// call sent after a streamed answer was read is logged after it.
func TestLogArrivalOrder(t *testing.T) {
	var l Log
	release := make(chan struct{})
	srv := httptest.NewServer(l.Handler(func(w http.ResponseWriter, r *http.Request) string {
		if r.URL.Path == "/stream" {
			_, _ = io.WriteString(w, "all of it") // a failed write is the client's error, which the test checks
			w.(http.Flusher).Flush()
			<-release // the handler is still running when the client has read everything
		}
		return strings.TrimPrefix(r.URL.Path, "/")
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("all of it"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	if got := l.Calls(); len(got) != 1 || got[0].Endpoint != "" || got[0].Path != "/stream" {
		t.Errorf("Calls() while /stream is served = %+v, want it in place with no endpoint yet", got)
	}
	if n := l.Count("stream"); n != 0 {
		t.Errorf("Count(stream) while it is served = %d, want 0", n)
	}
	r2, err := http.Get(srv.URL + "/next")
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	close(release)
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for l.Count("stream") == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	var eps []string
	for _, c := range l.Calls() {
		eps = append(eps, c.Endpoint)
	}
	if diff := cmp.Diff([]string{"stream", "next"}, eps); diff != "" {
		t.Errorf("endpoints mismatch (-want +got):\n%s", diff)
	}
}

func TestWriteFile(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "a", "b", "f.txt")
	n, err := WriteFile(dest, strings.NewReader("hello"))
	if err != nil || n != 5 {
		t.Fatalf("WriteFile = %d, %v; want 5, nil", n, err)
	}
	if b, err := os.ReadFile(dest); err != nil || string(b) != "hello" {
		t.Errorf("file = %q, %v", b, err)
	}
	if _, err := WriteFile(filepath.Join(dest, "under-a-file"), strings.NewReader("x")); err == nil {
		t.Error("WriteFile under a regular file = nil error, want one")
	}
}

func TestFaultServe(t *testing.T) {
	errorBody := func(w http.ResponseWriter, status int) {
		WriteJSON(w, status, map[string]string{"own": http.StatusText(status)})
	}
	var fs Faults
	fs.Inject("exec", 2, Fault{Status: 502})
	fs.Inject("exec", 3, Fault{Status: 503, Late: true})
	var served int
	handle := func(w http.ResponseWriter) {
		served++
		WriteJSON(w, http.StatusOK, map[string]int{"n": served})
	}
	for _, want := range []struct {
		status int
		body   string
		served int
	}{
		{200, `{"n":1}` + "\n", 1},                       // no fault: served
		{502, `{"own":"Bad Gateway"}` + "\n", 1},         // a fault: not served
		{503, `{"own":"Service Unavailable"}` + "\n", 2}, // a late fault: served, its answer replaced
		{200, `{"n":3}` + "\n", 3},
	} {
		rec := httptest.NewRecorder()
		fs.Serve(rec, "exec", errorBody, handle)
		if rec.Code != want.status || rec.Body.String() != want.body || served != want.served {
			t.Errorf("call %d: answer %d %q, served %d times; want %d %q, served %d times", fs.Calls("exec"), rec.Code, rec.Body, served, want.status, want.body, want.served)
		}
	}
}

// A delete must leave nothing running even when a process forks while KillAll scans
// /proc: a child forked after the listing is not in it.
func TestKillAllCatchesChildrenForkedDuringTheScan(t *testing.T) {
	var p Procs
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	done := make(chan Outcome, 1)
	go func() {
		// `timeout` moves the loop out of the command's process group, so only the
		// environment marker finds what it forks.
		done <- p.Run(context.Background(), Command{Path: "/bin/sh", Args: []string{"-c",
			"timeout 60 sh -c 'touch " + started + "; i=0; while [ $i -lt 3000 ]; do sleep 30 & i=$((i+1)); done; wait' & wait"}, Env: BaseEnv(dir)})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	p.KillAll()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after KillAll")
	}
	p.mu.Lock()
	marker := markerVar + "=" + p.token
	p.mu.Unlock()
	// SIGKILL takes effect asynchronously; what still carries the marker after a moment
	// survived.
	var left []int
	for range 20 {
		left = tagged(marker)
		if len(left) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	t.Fatalf("%d processes of the deleted sandbox still run: %v", len(left), left)
}

// tagged lists the live processes whose environment holds marker.
func tagged(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		if slices.ContainsFunc(bytes.Split(env, []byte{0}), func(kv []byte) bool { return string(kv) == marker }) {
			pids = append(pids, pid)
		}
	}
	return pids
}
