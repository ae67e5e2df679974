package fakekit

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A fake that embeds Host logs each call under the endpoint its router names, with the
// status and body sizes, and stops serving after Stop.
func TestHostLogsCalls(t *testing.T) {
	t.Parallel()
	var h Host
	h.Start(func(w http.ResponseWriter, r *http.Request) string {
		if r.URL.Path != "/create" {
			http.NotFound(w, r)
			return "unknown"
		}
		_, _ = io.Copy(io.Discard, r.Body)
		WriteJSON(w, http.StatusCreated, map[string]string{"id": "b1"})
		return "create"
	})
	post := func(path string) {
		t.Helper()
		resp, err := http.Post(h.URL+path, "application/json", strings.NewReader(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	post("/create")
	post("/nope")
	calls := h.Calls()
	if len(calls) != 2 || h.Count("create") != 1 || h.Count("unknown") != 1 {
		t.Fatalf("calls = %+v, want one create and one unknown", calls)
	}
	if c := calls[0]; c.Endpoint != "create" || c.Status != http.StatusCreated || c.RequestBytes != 7 || c.ResponseBytes == 0 {
		t.Errorf("create call = %+v, want status 201, 7 request bytes and a body", c)
	}
	h.Stop()
	if resp, err := http.Get(h.URL + "/create"); err == nil {
		resp.Body.Close()
		t.Error("the server still answers after Stop")
	}
}
