package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRunServesScript(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-script", "../testdata/two-turns.json"}, pw) }()
	url, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url = strings.TrimSpace(url)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("printed URL %q, want a loopback URL", url)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "0.01" {
		t.Errorf("first answer = %d (Retry-After %q), want the scripted 429", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	if err := run(t.Context(), nil, io.Discard); err == nil || !strings.Contains(err.Error(), "-script") {
		t.Errorf("run without -script: %v", err)
	}
}
