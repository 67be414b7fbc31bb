package chat

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat"
	"datachat/internal/llmtest"
	"datachat/internal/mcpserver"
)

// TestToolsAsMCPDeclaresThem: the data tools the chat gives the model — in
// the request the provider receives — have the names, descriptions and
// argument schemas MCP's tools/list gives agents, one declaration each (the
// chat narrows execute_sql's source to the attached databases' names; MCP
// over HTTP adds conversation_id).
func TestToolsAsMCPDeclaresThem(t *testing.T) {
	// A turn with documents, a database source and more tables than the
	// prompt holds declares every data tool the chat has.
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{{Text: []string{"ok"}}}})
	src := &wideSources{n: 400}
	f.r.Sources, f.r.SchemaBudget = src, 2000
	if _, _, err := f.send(t, "How many overdue invoices are there?"); err != nil {
		t.Fatal(err)
	}
	for _, fixed := range []bool{true, false} {
		var body struct {
			Tools []struct {
				Function struct {
					Name        string `json:"name"`
					Description string `json:"description"`
					Parameters  any    `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(f.fake.ChatRequests()[0].Raw, &body); err != nil {
			t.Fatal(err)
		}
		conv := ""
		if fixed {
			conv = f.conv.ID
		}
		mcpTools := listMCPTools(t, mcpserver.Options{User: f.user, Conversation: conv, Sources: src})
		shared := 0
		for _, ct := range body.Tools {
			c := ct.Function
			m, ok := mcpTools[c.Name]
			if !ok {
				if c.Name != datachat.ToolRequestConfirmation {
					t.Errorf("the chat declares %s, which MCP does not", c.Name)
				}
				continue
			}
			shared++
			if c.Description != m.Description {
				t.Errorf("%s: the chat describes it as %q, MCP as %q", c.Name, c.Description, m.Description)
			}
			chatArgs := c.Parameters.(map[string]any)
			if c.Name == datachat.ToolExecuteSQL {
				source := chatArgs["properties"].(map[string]any)["source"].(map[string]any)
				if want := []any{"warehouse"}; !reflect.DeepEqual(source["enum"], want) {
					t.Errorf("execute_sql's source: enum %v, want %v", source["enum"], want)
				}
				delete(source, "enum")
			}
			var mcpArgs map[string]any
			b, _ := json.Marshal(m.InputSchema)
			if err := json.Unmarshal(b, &mcpArgs); err != nil {
				t.Fatal(err)
			}
			if !fixed {
				props := mcpArgs["properties"].(map[string]any)
				if _, ok := props["conversation_id"]; !ok || mcpArgs["required"].([]any)[0] != "conversation_id" {
					t.Errorf("%s over HTTP: arguments %s, want conversation_id required", c.Name, b)
				}
				delete(props, "conversation_id")
				if req := mcpArgs["required"].([]any)[1:]; len(req) > 0 {
					mcpArgs["required"] = req
				} else {
					delete(mcpArgs, "required")
				}
			}
			if !reflect.DeepEqual(chatArgs, mcpArgs) {
				cb, _ := json.Marshal(chatArgs)
				mb, _ := json.Marshal(mcpArgs)
				t.Errorf("%s's arguments (fixed conversation %t):\nchat %s\nMCP  %s", c.Name, fixed, cb, mb)
			}
		}
		if want := 7; shared != want { // execute_sql, load_dataset, search_documents, list_datasets, describe_dataset, list_tables, describe_table
			t.Errorf("%d tools shared, want %d: the chat declares %+v", shared, want, body.Tools)
		}
	}
}

func listMCPTools(t *testing.T, o mcpserver.Options) map[string]*mcp.Tool {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(o).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

// loadData loads every URL as one table and records what it was asked.
type loadData struct {
	benchData
	loads []string // "url name"
}

func (d *loadData) LoadURL(_ context.Context, _, url, name string) ([]*datachat.Dataset, error) {
	d.loads = append(d.loads, url+" "+name)
	return []*datachat.Dataset{{Name: datachat.TableName(name, nil), Source: url, Columns: []datachat.Column{{Name: "x", Type: "integer"}}}}, nil
}

// TestLoadDatasetName: load_dataset's name (which MCP's takes too) names
// the table, also once the user approves the load of a URL they never
// wrote.
func TestLoadDatasetName(t *testing.T) {
	const url = "https://example.com/a.csv"
	load := llmtest.Turn{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("load_dataset", `{"url":"`+url+`","name":" Sales 2024 "}`)}, Usage: usage}
	done := llmtest.Turn{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Done."}, Usage: usage}

	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{load, done}})
	d := &loadData{benchData: newBenchData()}
	f.r.Data = d
	evs, _, err := f.send(t, "Load "+url+" please")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{url + " Sales 2024"}; !reflect.DeepEqual(d.loads, want) {
		t.Errorf("loads %q, want %q", d.loads, want)
	}
	if _, results := toolRounds(t, evs); len(results) != 1 || !strings.Contains(results[0].Content, "as table sales_2024") {
		t.Errorf("results %+v", results)
	}

	f = newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{load, done}})
	d = &loadData{benchData: newBenchData()}
	f.r.Data = d
	_, c := f.pause(t, "Load the file the report mentions")
	if want := `{"url":"` + url + `","name":"Sales 2024"}`; string(c.Parameters) != want {
		t.Errorf("confirmation parameters %s, want %s", c.Parameters, want)
	}
	if _, _, err := f.confirm(t, c.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	if want := []string{url + " Sales 2024"}; !reflect.DeepEqual(d.loads, want) {
		t.Errorf("after approval: loads %q, want %q", d.loads, want)
	}
}
