package faulttest

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talkops/talkops/agent/model/modeltest"
)

// Model faults, by the call they hit.
const (
	opModel = "model" // the agent's calls
	opJudge = "judge" // the judge's calls
)

// modelKey is the API key the runs use; the canary test plants its own.
const modelKey = "sk-ant-api03-faulttestModelKey0000000000000000"

// scriptedModel is a modeltest server (the Anthropic wire format) that plays the agent's
// and the judge's part for one row: the agent runs one command and answers, the judge
// passes the criterion, unless the row puts a fault on one of their calls.
type scriptedModel struct {
	srv   *modeltest.Server
	proxy *faultProxy
	// URL is the base URL to give talkops (through the proxy).
	URL string

	agentCalls, judgeCalls atomic.Int32
	agentSeen, judgeSeen   chan struct{}
	agentOnce, judgeOnce   sync.Once
}

// scriptOptions say what the agent does and where the fault is.
type scriptOptions struct {
	// command is what the agent runs with the execute tool on its first turn.
	command string
	// fault is one of the model faults (f429, f500, fHang, fDrop, fMalformedArgs, …)
	// on op (opModel or opJudge); "" is none.
	fault, op string
	// hold makes the first call of op wait until the client gives up (signal rows).
	hold string
}

func newScriptedModel(t testing.TB, o scriptOptions) *scriptedModel {
	t.Helper()
	m := &scriptedModel{agentSeen: make(chan struct{}), judgeSeen: make(chan struct{})}
	m.srv = modeltest.NewServerFunc(func(c modeltest.Call) modeltest.Step { return m.answer(c, o) })
	t.Cleanup(m.srv.Close)
	m.proxy = newFaultProxy(t, m.srv.URL)
	m.URL = m.proxy.URL
	switch {
	case o.fault == fMalformedBody:
		r := m.proxy.add("POST", `^/v1/messages$`, 0, actBody, 0)
		r.reply = `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"execute","input":`
	case o.fault == fNullBody && o.op == opModel:
		m.proxy.add("POST", `^/v1/messages$`, 0, actBody, 0).reply = "null"
	case o.fault == fNullBody && o.op == opJudge:
		// Only the judge's calls offer the submit_verdicts tool.
		m.proxy.addBody("POST", `^/v1/messages$`, `"submit_verdicts"`, 0, actBody, 0).reply = "null"
	}
	return m
}

var evidenceRef = regexp.MustCompile(`id=\\?"(E[0-9]+)\\?"`)

func (m *scriptedModel) answer(c modeltest.Call, o scriptOptions) modeltest.Step {
	if isJudgeCall(c) {
		n := m.judgeCalls.Add(1)
		m.judgeOnce.Do(func() { close(m.judgeSeen) })
		if o.hold == opJudge && n == 1 {
			return modeltest.Step{Delay: modeltest.Duration(5 * time.Minute)}
		}
		if o.op == opJudge {
			if st, ok := faultStep(o.fault, n); ok {
				return st
			}
			if o.fault == fMalformedArgs {
				return modeltest.Step{ToolCalls: []modeltest.ToolCall{{Name: "submit_verdicts", RawArguments: `{"verdicts":"all good"}`}}}
			}
		}
		ref := "E1"
		if sm := evidenceRef.FindSubmatch(c.Body); sm != nil {
			ref = string(sm[1])
		}
		in, _ := json.Marshal(map[string]any{"verdicts": []map[string]any{{
			"id": "crit", "reasoning": "the recorded output shows it", "evidence_refs": []string{ref},
			"passed": true, "gap": "", "confidence": "high",
		}}})
		return modeltest.Step{ToolCalls: []modeltest.ToolCall{{Name: "submit_verdicts", Input: in}}}
	}
	n := m.agentCalls.Add(1)
	m.agentOnce.Do(func() { close(m.agentSeen) })
	if o.hold == opModel && n == 1 {
		return modeltest.Step{Delay: modeltest.Duration(5 * time.Minute)}
	}
	if o.op == opModel {
		if st, ok := faultStep(o.fault, n); ok {
			return st
		}
		if o.fault == fMalformedArgs && n == 1 {
			return modeltest.Step{ToolCalls: []modeltest.ToolCall{{Name: "execute", RawArguments: `{"command": "echo unterminated`}}}
		}
	}
	if c.Request != nil && len(c.Request.Messages) > 0 {
		last := c.Request.Messages[len(c.Request.Messages)-1]
		if len(last.ToolResults) > 0 || c.ToolChoice == "none" {
			return modeltest.Step{Text: "Done: the command ran."}
		}
	}
	input, _ := json.Marshal(map[string]string{"command": o.command})
	return modeltest.Step{Text: "Running it.", ToolCalls: []modeltest.ToolCall{{Name: "execute", Input: input}}}
}

// faultStep is the answer for a status, hang or drop fault on the nth call of its target.
func faultStep(fault string, n int32) (modeltest.Step, bool) {
	retryAfter := map[string]string{"Retry-After": "1"}
	switch {
	case fault == f429 || (fault == f429Once && n == 1):
		return modeltest.Step{Status: http.StatusTooManyRequests, Headers: retryAfter}, true
	case fault == f500 || (fault == f500Once && n == 1):
		return modeltest.Step{Status: http.StatusInternalServerError}, true
	case fault == fDropAlways || (fault == fDropOnce && n == 1):
		return modeltest.Step{Drop: true}, true
	case fault == fHang || fault == fStall:
		return modeltest.Step{Delay: modeltest.Duration(5 * time.Minute)}, true
	}
	return modeltest.Step{}, false
}

// isJudgeCall tells the judge's calls from the agent's: only the judge offers submit_verdicts.
func isJudgeCall(c modeltest.Call) bool {
	if c.Request == nil {
		return false
	}
	for _, t := range c.Request.Tools {
		if t.Name == "submit_verdicts" {
			return true
		}
	}
	return false
}
