package hygiene

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	r := NewRedactor("hunter2hunter2", "abc", "", "line-one-secret\nline-two-secret", "hunter2", `quote"back\slash`)
	tests := []struct {
		name, in, want string
	}{
		{"known value", "pw=hunter2hunter2!", "pw=***!"},
		{"longest first", "hunter2 and hunter2hunter2", "*** and ***"},
		{"short values ignored", "abc is not a secret", "abc is not a secret"},
		{"multi-line secret whole", "x line-one-secret\nline-two-secret y", "x *** y"},
		{"multi-line secret cut", "tail: line-two-secret", "tail: ***"},
		{"multi-line secret JSON-escaped", `{"out":"line-one-secret\nline-two-secret"}`, `{"out":"***"}`},
		{"secret as written", `pw=quote"back\slash`, "pw=***"},
		{"secret JSON-escaped", `{"pw":"quote\"back\\slash"}`, `{"pw":"***"}`},
		{"github classic", "token ghp_" + strings.Repeat("a", 36) + " end", "token *** end"},
		{"github fine-grained", "github_pat_" + strings.Repeat("B", 82), "***"},
		{"github app", "ghs_" + strings.Repeat("x", 36), "***"},
		{"anthropic", "key=sk-ant-api03-" + strings.Repeat("Z", 40), "key=***"},
		{"openai", "sk-proj-" + strings.Repeat("q", 48), "***"},
		{"aws", "AKIAIOSFODNN7EXAMPLE", "***"},
		{"slack", "xoxb-123456789012-abcdefABCDEF", "***"},
		{"gitlab", "glpat-" + strings.Repeat("k", 20), "***"},
		{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nafter", "***\nafter"},
		{"url credentials", "DATABASE_URL=postgres://app:s3cr3t-pw@db.internal:5432/prod ok", "DATABASE_URL=postgres://***@db.internal:5432/prod ok"},
		{"url token as user", "git clone https://x-access-token:abcdef123456@github.com/o/r", "git clone https://***@github.com/o/r"},
		{"url without password kept", "ssh://git@github.com/o/r and https://example.com/a@b", "ssh://git@github.com/o/r and https://example.com/a@b"},
		{"prose untouched", "ask a skeptic about risk-taking", "ask a skeptic about risk-taking"},
		{"inside a word untouched", "task-queue-processing-worker-name", "task-queue-processing-worker-name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	var zero *Redactor
	if got := zero.Redact("AKIAIOSFODNN7EXAMPLE"); got != "***" {
		t.Errorf("nil Redactor.Redact(aws key) = %q, want ***", got)
	}
}

func TestFence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		fence string
	}{
		{"plain", "```"},
		{"has ``` inside", "````"},
		{"has ````` five", "``````"},
		{"`one`", "```"},
	}
	for _, tt := range tests {
		got := Fence(tt.in)
		lines := strings.Split(got, "\n")
		if lines[0] != tt.fence+"text" || lines[len(lines)-1] != tt.fence {
			t.Errorf("Fence(%q) = %q, want fence %q", tt.in, got, tt.fence)
		}
		inner := strings.Join(lines[1:len(lines)-1], "\n")
		if inner != tt.in {
			t.Errorf("Fence(%q) body = %q", tt.in, inner)
		}
		if longestRun(inner, '`') >= len(tt.fence) {
			t.Errorf("Fence(%q): body can close the fence", tt.in)
		}
	}
}

func TestNeutralizeMentions(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"cc @octocat", "cc @\u200doctocat"},
		{"@org/team please", "@\u200dorg/team please"},
		{"(@all)", "(@\u200dall)"},
		{"mail me@example.com", "mail me@example.com"},
		{"@ alone", "@ alone"},
	}
	for _, tt := range tests {
		if got := NeutralizeMentions(tt.in); got != tt.want {
			t.Errorf("NeutralizeMentions(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestStripMarkers(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"a <!-- talkops:result:v1 key=x --> b", "a  b"},
		{"hidden <!-- unterminated", "hidden "},
		{"stray --> arrow", "stray --\u200d> arrow"},
	}
	for _, tt := range tests {
		got := StripMarkers(tt.in)
		if got != tt.want {
			t.Errorf("StripMarkers(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "<!--") {
			t.Errorf("StripMarkers(%q) still opens a comment", tt.in)
		}
	}
}

func TestStripANSI(t *testing.T) {
	t.Parallel()
	in := "\x1b[31mred\x1b[0m\r\nbell\x07 tab\tnul\x00 osc\x1b]0;title\x07 bad\xff"
	want := "red\nbell tab\tnul osc bad\uFFFD"
	if got := StripANSI(in); got != want {
		t.Errorf("StripANSI(%q) = %q, want %q", in, got, want)
	}
}

func TestInline(t *testing.T) {
	t.Parallel()
	got := Inline("a | b\n*c* [x](http://e) <b>", 0)
	want := `a \| b \*c\* \[x\]\(http://e\) \<b\>`
	if got != want {
		t.Errorf("Inline() = %q, want %q", got, want)
	}
	if got := Inline(strings.Repeat("x", 100), 10); len(got) > 10 {
		t.Errorf("Inline(100 x, 10) = %q, longer than 10 bytes", got)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 4, 5, 7, 10} {
		got := Truncate("héllo wörld", n)
		if len(got) > n || !utf8.ValidString(got) {
			t.Errorf("Truncate(%d) = %q (%d bytes)", n, got, len(got))
		}
	}
	if got := Truncate("short", 10); got != "short" {
		t.Errorf("Truncate(short) = %q", got)
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	r := NewRedactor("s3cr3t-value")
	got := r.Text("\x1b[1m@team\x1b[0m says s3cr3t-value <!-- talkops:result:v1 -->")
	want := "@\u200dteam says *** "
	if got != want {
		t.Errorf("Text() = %q, want %q", got, want)
	}
}
