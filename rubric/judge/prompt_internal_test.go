package judge

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestToolSchema: the schema is valid JSON, names the ids, and asks for the reasoning
// before the verdict in property order (clients that keep the raw schema send it so).
func TestToolSchema(t *testing.T) {
	t.Parallel()
	raw, desc := tool([]string{"a", `b"c`})
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("tool schema is not JSON: %v\n%s", err, raw)
	}
	text := string(raw)
	if desc == "" || !strings.Contains(text, `"enum":["a","b\"c"]`) || !strings.Contains(text, `"minItems":2,"maxItems":2`) {
		t.Errorf("schema = %s", text)
	}
	if strings.Index(text, `"reasoning":{`) > strings.Index(text, `"passed":{`) {
		t.Errorf("the schema lists the verdict before the reasoning: %s", text)
	}
}
