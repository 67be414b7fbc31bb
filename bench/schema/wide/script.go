package wide

import (
	"encoding/json"
	"fmt"
	"strings"

	"datachat"
	"datachat/internal/eval"
	"datachat/internal/llmtest"
)

// Script is a fake model for a suite over this database that uses only what
// its prompt shows: for a question, it calls describe_table for each table
// the question needs that the system prompt does not describe, then runs the
// question's gold SQL on its source, then answers with the result. So the
// answers are right whether or not the prompt held the tables, and the
// describe_table calls say how often it did not. For a question the data
// cannot answer it searches the tables with list_tables, then says what is
// missing.
func Script(s *eval.Suite) llmtest.Script {
	byQuestion := map[string]*eval.Question{}
	for i := range s.Questions {
		byQuestion[s.Questions[i].Question] = &s.Questions[i]
	}
	turn := &llmtest.Turn{
		ToolCallsFunc: func(r *llmtest.Request) []llmtest.ToolCall {
			q := byQuestion[r.LastUser()]
			if q == nil {
				return nil
			}
			if q.Unanswerable {
				// Look among the tables the prompt does not describe.
				if lastCalled(r) == "" {
					args, _ := json.Marshal(map[string]string{"pattern": "*" + q.Missing[0] + "*"})
					return []llmtest.ToolCall{{Name: datachat.ToolListTables, Args: args}}
				}
				return nil
			}
			switch lastCalled(r) {
			case "": // the question: look at the tables the prompt lacks
				var calls []llmtest.ToolCall
				for _, t := range Missing(r.Messages[0].Text, q.Tables) {
					args, _ := json.Marshal(map[string]string{"name": t})
					calls = append(calls, llmtest.ToolCall{Name: datachat.ToolDescribeTable, Args: args})
				}
				if len(calls) > 0 {
					return calls
				}
				return []llmtest.ToolCall{gold(q)}
			case datachat.ToolDescribeTable:
				return []llmtest.ToolCall{gold(q)}
			}
			return nil
		},
		ReplyFunc: func(r *llmtest.Request) string {
			if q := byQuestion[r.LastUser()]; q != nil && q.Unanswerable && lastCalled(r) == datachat.ToolListTables {
				return fmt.Sprintf("No table of the warehouse holds %s data (list_tables finds none), so I cannot answer that.", strings.Join(q.Missing, " or "))
			}
			if lastCalled(r) != datachat.ToolExecuteSQL {
				return ""
			}
			return "The result: " + strings.Join(strings.Fields(r.LastToolResult()), " ")
		},
	}
	return llmtest.Script{Default: turn}
}

// gold is the call running the question's gold SQL.
func gold(q *eval.Question) llmtest.ToolCall {
	args := map[string]string{"query": q.SQL}
	if q.Source != "" {
		args["source"] = q.Source
	}
	b, _ := json.Marshal(args)
	return llmtest.ToolCall{Name: datachat.ToolExecuteSQL, Args: b}
}

// lastCalled is the tool the model called last in this turn ("" when the
// request ends with the user's message).
func lastCalled(r *llmtest.Request) string {
	if r.Last().Role != "tool" {
		return ""
	}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "assistant" && len(m.ToolCalls) > 0 {
			return m.ToolCalls[len(m.ToolCalls)-1].Name
		}
	}
	return ""
}

// Missing returns those of tables (SOURCE.SCHEMA.TABLE) a system prompt does
// not describe: its description begins "Table SCHEMA.TABLE (", the names
// quoted or not.
func Missing(system string, tables []string) []string {
	var out []string
	for _, t := range tables {
		parts := strings.SplitN(t, ".", 2)
		if len(parts) != 2 {
			continue
		}
		name := parts[1]
		described := false
		schema, table, _ := strings.Cut(name, ".")
		for _, written := range []string{name, `"` + schema + `"."` + table + `"`, "`" + schema + "`.`" + table + "`"} {
			described = described || strings.Contains(system, fmt.Sprintf("Table %s (", written)) || strings.Contains(system, fmt.Sprintf("Table %s:", written))
		}
		if !described {
			out = append(out, name)
		}
	}
	return out
}
