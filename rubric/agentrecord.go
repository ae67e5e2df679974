package rubric

import (
	"github.com/talkops/talkops/result"
)

// AgentRecord is what the runner recorded of the agent's passes so far. It is the judge's
// evidence besides the checks, the workspace diff and files: the task prompt, every
// command the agent ran with its real exit code and output, and the agent's final
// message (shown to the judge only when a criterion selects final_message, and then as
// unverified claims).
type AgentRecord struct {
	Prompt string
	// Commands are the commands of every pass so far, oldest first, as the agent
	// recorded them.
	Commands []result.Command
	// FinalMessage is the agent's last answer of the latest pass.
	FinalMessage string
}

// JudgeUsage sums the judge usage recorded on the items of every iteration; nil when no
// item records any.
func JudgeUsage(iters []result.Iteration) *result.Usage {
	var total result.Usage
	found := false
	for _, it := range iters {
		for _, item := range it.Items {
			if item.Judge == nil || item.Judge.Usage == nil {
				continue
			}
			found = true
			u := item.Judge.Usage
			total.InputTokens += u.InputTokens
			total.OutputTokens += u.OutputTokens
			total.CachedInputTokens += u.CachedInputTokens
			total.CostUSD += u.CostUSD
		}
	}
	if !found {
		return nil
	}
	return &total
}
