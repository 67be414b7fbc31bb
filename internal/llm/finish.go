package llm

import "strings"

// FinishReason normalizes the finish reason a provider sent:
// [FinishToolCalls] when the answer called tools, else what reasons maps it
// to, else the provider's own reason lower-cased.
func FinishReason(reason string, calledTools bool, reasons map[string]string) string {
	if calledTools {
		return FinishToolCalls
	}
	if r, ok := reasons[reason]; ok {
		return r
	}
	return strings.ToLower(reason)
}
