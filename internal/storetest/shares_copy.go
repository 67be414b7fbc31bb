package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"datachat"
)

// sharedFixture is a conversation of alice shared with bob that holds one
// of everything a conversation holds.
type sharedFixture struct {
	alice, bob, carol *datachat.User
	conv              *datachat.Conversation
	datasets          []*datachat.Dataset
	docs              []*datachat.Document
	chunks            [][]*datachat.Chunk
	share             *datachat.Share
}

func newSharedFixture(t *testing.T, s datachat.Store) *sharedFixture {
	ctx := t.Context()
	f := &sharedFixture{alice: mustUser(t, s, "alice"), bob: mustUser(t, s, "bob"), carol: mustUser(t, s, "carol")}
	f.conv = mustConversation(t, s, f.alice.ID)
	c := f.conv.ID

	// A question, an answer with its parts, tool calls, citations and
	// number checks; a failed answer; a query the user ran; an answer
	// awaiting a confirmation, and one still streaming.
	q := mustMessage(t, s, c, datachat.RoleUser, datachat.StatusComplete)
	q.Content = "How many penguins? 🐧"
	if err := s.UpdateMessage(ctx, q); err != nil {
		t.Fatal(err)
	}
	a := mustMessage(t, s, c, datachat.RoleAssistant, datachat.StatusStreaming)
	for i, call := range []string{"c1", "c2"} {
		if err := s.CreateToolCall(ctx, &datachat.ToolCall{MessageID: a.ID, Seq: i + 1, CallID: call, Tool: datachat.ToolExecuteSQL,
			Args: json.RawMessage(`{"query":"SELECT count(*) FROM penguins"}`), OK: i == 0, Result: "344", Error: map[bool]string{true: "", false: "boom"}[i == 0],
			StartedAt: base.Add(time.Duration(i) * time.Second), DurationMS: 12}); err != nil {
			t.Fatal(err)
		}
	}
	a.Content, a.Status, a.InputTokens, a.OutputTokens = "There are 344 penguins [1].", datachat.StatusComplete, 100, 20
	a.Parts = []datachat.Part{text("Counting. "), {Type: datachat.PartToolCall, CallID: "c1"}, {Type: datachat.PartToolCall, CallID: "c2"}, text("There are 344 penguins [1].")}
	a.Sources = []datachat.Source{{ID: "s1", Text: "Penguins live south.", Metadata: map[string]any{"document": "guide.pdf", "page": float64(2)}}}
	a.NumberChecks = []datachat.NumberCheck{{Text: "344", Start: 10, End: 13, Status: "matched", Source: json.RawMessage(`{"tool_call_id":"c1","row":0,"column":0}`)}}
	if err := s.FinishMessage(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	failed := mustMessage(t, s, c, datachat.RoleAssistant, datachat.StatusStreaming)
	failed.Status, failed.Error, failed.ErrorReason, failed.ErrorSuggestedAction = datachat.StatusError, "The model failed.", "provider_error", "Try again."
	if err := s.FinishMessage(ctx, failed, nil); err != nil {
		t.Fatal(err)
	}
	mustMessage(t, s, c, datachat.RoleAssistant, datachat.StatusAwaitingConfirmation)
	streaming := &datachat.Message{ConversationID: c, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
	if err := s.BeginTurn(ctx, nil, streaming, datachat.Lease{Owner: "o", Node: "n", Until: time.Now().Add(time.Hour)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendParts(ctx, streaming.ID, 0, []datachat.Part{text("Half an ans"), text("wer")}); err != nil {
		t.Fatal(err)
	}

	// Two datasets with the dictionary's descriptions, two documents, two
	// sources attached.
	for i, name := range []string{"penguins", "islands"} {
		d := &datachat.Dataset{ConversationID: c, Name: name, Source: name + ".csv", Format: "csv", Path: name + "-path.parquet",
			RowCount: int64(100 * (i + 1)), Bytes: 4096, CreatedAt: base.Add(time.Duration(i) * time.Minute),
			Columns: []datachat.Column{{Name: "id", Type: "integer", SQLType: "BIGINT"}, {Name: "species", Type: "text", SQLType: "VARCHAR"}}}
		if err := s.CreateDataset(ctx, d); err != nil {
			t.Fatal(err)
		}
		f.datasets = append(f.datasets, d)
	}
	notes, desc := "Counts are per season.", "One row per bird."
	if err := s.UpdateDictionary(ctx, f.alice.ID, c, datachat.Dictionary{Notes: &notes,
		Datasets: map[string]datachat.DatasetDictionary{"penguins": {Description: &desc, Columns: map[string]string{"species": "Latin name"}}}}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"guide.pdf", "notes.md"} {
		d := &datachat.Document{ConversationID: c, Name: name, MediaType: "text/plain", Pages: i + 1, Bytes: 10,
			Metadata: map[string]string{"team": "birds"}, CreatedAt: base.Add(time.Duration(i) * time.Minute)}
		chunks := []*datachat.Chunk{{Seq: 0, Page: 1, Heading: "Intro", Start: 0, End: 5, Text: name + " one"}, {Seq: 1, Page: 2, Start: 5, End: 9, Text: name + " two ✓"}}
		if err := s.CreateDocument(ctx, d, chunks); err != nil {
			t.Fatal(err)
		}
		f.docs = append(f.docs, d)
		f.chunks = append(f.chunks, chunks)
	}
	for _, name := range []string{"warehouse", "shop"} {
		if err := s.CreateDBSource(ctx, &datachat.DBSource{Name: name, Kind: "postgres", SealedURL: "v1:x", AllUsers: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.AttachDBSource(ctx, c, name); err != nil {
			t.Fatal(err)
		}
	}
	// The semantic layer: metrics of both datasets, a table of each source.
	if err := s.UpdateDictionary(ctx, f.alice.ID, c, datachat.Dictionary{
		Datasets: map[string]datachat.DatasetDictionary{
			"penguins": {Metrics: map[string]datachat.Metric{"birds": {SQL: "count(*)"}}, Synonyms: map[string]string{"birds": "penguins"}},
			"islands":  {Metrics: map[string]datachat.Metric{"islands": {SQL: "count(*)"}}},
		},
		Sources: map[string]map[string]datachat.DatasetDictionary{
			"shop":      {"public.orders": {Description: ptr("One row per order.")}},
			"warehouse": {"public.stock": {Description: ptr("Stock per day.")}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	shares, _ := mustShare(t, s, f.alice.ID, c, []string{"bob"}, false)
	f.share = shares[0]
	return f
}

func testCopyShared(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	f := newSharedFixture(t, s)
	before, err := s.Messages(ctx, f.conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	cp := datachat.ShareCopy{
		ViewerID: f.bob.ID, ConversationID: f.conv.ID, Title: "Copy of conversation",
		Datasets:  map[string]string{f.datasets[0].ID: "copy-of-penguins.parquet"},
		Documents: []string{f.docs[1].ID, "no-such-document"},
		Sources:   []string{"shop", "not-attached"},
	}
	got, err := s.CopyShared(ctx, cp)
	if err != nil {
		t.Fatalf("CopyShared: %v", err)
	}
	conv := got.Conversation
	if conv.ID == "" || conv.ID == f.conv.ID || conv.UserID != f.bob.ID || conv.Title != cp.Title || conv.Notes != "Counts are per season." {
		t.Fatalf("the copy: got %+v", *conv)
	}
	if mine, err := s.Conversation(ctx, f.bob.ID, conv.ID); err != nil {
		t.Fatalf("the copy as its new owner's: %v", err)
	} else {
		equal(t, "the copy, read back", mine, conv)
	}
	if list, _ := s.Conversations(ctx, f.bob.ID); len(list) != 1 || list[0].ID != conv.ID {
		t.Errorf("bob's conversations: %v", ids(list))
	}

	// Messages: the same, in the same order, each with new ids; those
	// streaming or awaiting a confirmation are interrupted, the streamed
	// text kept.
	after, err := s.Messages(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("copied messages: got %d, want %d", len(after), len(before))
	}
	for i, m := range after {
		orig := *before[i]
		if m.ID == orig.ID || m.ConversationID != conv.ID {
			t.Errorf("message %d: id %q, conversation %q; want new ones", i, m.ID, m.ConversationID)
		}
		want := orig
		want.ID, want.ConversationID = m.ID, conv.ID
		switch orig.Status {
		case datachat.StatusStreaming:
			want.Status, want.Content = datachat.StatusInterrupted, "Half an answer"
			want.Parts = []datachat.Part{{Type: datachat.PartText, Text: "Half an answer"}}
		case datachat.StatusAwaitingConfirmation:
			want.Status = datachat.StatusInterrupted
		}
		if len(m.ToolCalls) != len(orig.ToolCalls) {
			t.Fatalf("message %d: %d tool calls copied, want %d", i, len(m.ToolCalls), len(orig.ToolCalls))
		}
		want.ToolCalls = make([]datachat.ToolCall, len(orig.ToolCalls))
		for j, tc := range orig.ToolCalls {
			if m.ToolCalls[j].ID == tc.ID {
				t.Errorf("message %d tool call %d kept its id", i, j)
			}
			tc.ID, tc.MessageID = m.ToolCalls[j].ID, m.ID
			want.ToolCalls[j] = tc
		}
		equal(t, fmt.Sprintf("copied message %d (%s)", i, orig.Status), m, &want)
	}
	// A turn can begin in the copy: nothing in it is left streaming.
	turn := &datachat.Message{ConversationID: conv.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
	if err := s.BeginTurn(ctx, nil, turn, datachat.Lease{Owner: "x", Node: "y", Until: time.Now().Add(time.Minute)}, time.Now()); err != nil {
		t.Errorf("BeginTurn in the copy: %v", err)
	}

	// Datasets: those asked for, reading the file given, descriptions kept.
	sets, err := s.Datasets(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 1 || got.Datasets[f.datasets[0].ID] == nil || len(got.Datasets) != 1 {
		t.Fatalf("copied datasets: got %d, returned %v", len(sets), got.Datasets)
	}
	equal(t, "the copied dataset, returned", got.Datasets[f.datasets[0].ID], sets[0])
	orig, _ := s.Dataset(ctx, f.conv.ID, f.datasets[0].ID)
	want := *orig
	want.ID, want.ConversationID, want.Path = sets[0].ID, conv.ID, "copy-of-penguins.parquet"
	equal(t, "the copied dataset", sets[0], &want)
	if sets[0].Description != "One row per bird." || sets[0].Columns[1].Description != "Latin name" {
		t.Errorf("the copied dataset's descriptions: %q, %+v", sets[0].Description, sets[0].Columns)
	}

	// Documents: those asked for, with their chunks.
	docs, err := s.Documents(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || len(got.Documents) != 1 {
		t.Fatalf("copied documents: got %d, returned %v", len(docs), got.Documents)
	}
	equal(t, "the copied document, returned", got.Documents[f.docs[1].ID], docs[0])
	wantDoc := *f.docs[1]
	wantDoc.ID, wantDoc.ConversationID = docs[0].ID, conv.ID
	equal(t, "the copied document", docs[0], &wantDoc)
	chunks, err := s.Chunks(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 2 {
		t.Fatalf("copied chunks: got %d, want 2", len(chunks))
	}
	for i, c := range chunks {
		w := *f.chunks[1][i]
		if c.ID == w.ID {
			t.Errorf("chunk %d kept its id", i)
		}
		w.ID, w.DocumentID = c.ID, docs[0].ID
		equal(t, fmt.Sprintf("copied chunk %d", i), c, &w)
	}

	// Sources: those asked for that the conversation has attached.
	srcs, err := s.ConversationDBSources(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 1 || srcs[0].Name != "shop" {
		t.Errorf("copied sources: got %v, want shop", srcs)
	}

	// The semantic layer: that of the datasets and sources copied, under
	// the copies' ids.
	layer, err := s.SemanticLayer(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "the copy's semantic layer", layer, &datachat.SemanticLayer{
		Datasets: map[string]datachat.TableSemantics{sets[0].ID: {Metrics: map[string]datachat.Metric{"birds": {SQL: "count(*)"}}, Synonyms: map[string]string{"birds": "penguins"}}},
		Sources:  map[string]map[string]datachat.TableSemantics{"shop": {"public.orders": {Description: "One row per order."}}},
	})

	// The original is as it was, and the copy does not depend on it.
	if again, _ := s.Messages(ctx, f.conv.ID); len(again) != len(before) || again[len(again)-1].Status != datachat.StatusStreaming {
		t.Errorf("the original after the copy: %d messages", len(again))
	}
	if err := s.DeleteConversation(ctx, f.alice.ID, f.conv.ID); err != nil {
		t.Fatal(err)
	}
	if kept, err := s.Messages(ctx, conv.ID); err != nil || len(kept) != len(before)+1 {
		t.Errorf("the copy after the original is deleted: %d messages, %v", len(kept), err)
	}
	if kept, err := s.Chunks(ctx, conv.ID); err != nil || len(kept) != 2 {
		t.Errorf("the copy's chunks after the original is deleted: %d, %v", len(kept), err)
	}

	// A copy of a conversation with nothing in it.
	empty := mustConversation(t, s, f.alice.ID)
	mustShare(t, s, f.alice.ID, empty.ID, nil, true)
	got, err = s.CopyShared(ctx, datachat.ShareCopy{ViewerID: f.carol.ID, ConversationID: empty.ID, Title: "Empty"})
	if err != nil {
		t.Fatalf("CopyShared of an empty conversation: %v", err)
	}
	if m, _ := s.Messages(ctx, got.Conversation.ID); len(m) != 0 || len(got.Datasets) != 0 || len(got.Documents) != 0 {
		t.Errorf("the copy of an empty conversation: %d messages, %v, %v", len(m), got.Datasets, got.Documents)
	}
}

func testCopySharedRefused(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	f := newSharedFixture(t, s)
	cp := func(viewer *datachat.User, conv string) datachat.ShareCopy {
		return datachat.ShareCopy{ViewerID: viewer.ID, ConversationID: conv, Title: "copy",
			Datasets: map[string]string{f.datasets[0].ID: "p.parquet"}, Documents: []string{f.docs[0].ID}, Sources: []string{"shop"}}
	}
	nothingMade := func(what string, viewer *datachat.User) {
		t.Helper()
		if list, _ := s.Conversations(ctx, viewer.ID); len(list) != 0 {
			t.Errorf("%s: %s has %d conversations, want none", what, viewer.Name, len(list))
		}
	}
	_, err := s.CopyShared(ctx, cp(f.carol, f.conv.ID))
	wantCode(t, "CopyShared by a user it is not shared with", err, datachat.ENOTFOUND)
	nothingMade("CopyShared by a user it is not shared with", f.carol)
	_, err = s.CopyShared(ctx, cp(f.alice, f.conv.ID))
	wantCode(t, "CopyShared by the owner", err, datachat.ENOTFOUND)
	_, err = s.CopyShared(ctx, cp(f.bob, "no-such-conversation"))
	wantCode(t, "CopyShared of an unknown conversation", err, datachat.ENOTFOUND)
	other := mustConversation(t, s, f.alice.ID)
	_, err = s.CopyShared(ctx, cp(f.bob, other.ID))
	wantCode(t, "CopyShared of the owner's other conversation", err, datachat.ENOTFOUND)
	nothingMade("refused copies", f.bob)
	bad := cp(f.bob, f.conv.ID)
	bad.Title = ""
	_, err = s.CopyShared(ctx, bad)
	wantCode(t, "CopyShared without a title", err, datachat.EINVALID)
	_, err = s.CopyShared(ctx, datachat.ShareCopy{ViewerID: "no-such-user", ConversationID: f.conv.ID, Title: "x"})
	wantCode(t, "CopyShared for an unknown viewer", err, datachat.ENOTFOUND)

	// The owner disabled, then the share revoked: no copy.
	if err := s.DisableUser(ctx, f.alice.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err = s.CopyShared(ctx, cp(f.bob, f.conv.ID))
	wantCode(t, "CopyShared of a disabled owner's conversation", err, datachat.ENOTFOUND)
	if err := s.EnableUser(ctx, f.alice.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteShare(ctx, f.alice.ID, f.conv.ID, f.share.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.CopyShared(ctx, cp(f.bob, f.conv.ID))
	wantCode(t, "CopyShared after the share is revoked", err, datachat.ENOTFOUND)
	nothingMade("refused copies", f.bob)

	// Through everyone: any other user, and the dataset of another
	// conversation is not copied even when asked for.
	mustShare(t, s, f.alice.ID, f.conv.ID, nil, true)
	stray := &datachat.Dataset{ConversationID: other.ID, Name: "secret", Path: "secret.parquet"}
	if err := s.CreateDataset(ctx, stray); err != nil {
		t.Fatal(err)
	}
	strayDoc := &datachat.Document{ConversationID: other.ID, Name: "secret.md"}
	if err := s.CreateDocument(ctx, strayDoc, []*datachat.Chunk{{Text: "secret"}}); err != nil {
		t.Fatal(err)
	}
	c := cp(f.carol, f.conv.ID)
	c.Datasets[stray.ID] = "stolen.parquet"
	c.Documents = append(c.Documents, strayDoc.ID)
	got, err := s.CopyShared(ctx, c)
	if err != nil {
		t.Fatalf("CopyShared through everyone: %v", err)
	}
	if _, ok := got.Datasets[stray.ID]; ok || len(got.Datasets) != 1 {
		t.Errorf("a dataset of another conversation was copied: %v", got.Datasets)
	}
	if _, ok := got.Documents[strayDoc.ID]; ok || len(got.Documents) != 1 {
		t.Errorf("a document of another conversation was copied: %v", got.Documents)
	}
	if chunks, _ := s.Chunks(ctx, got.Conversation.ID); len(chunks) != 2 {
		t.Errorf("chunks of the copy: %d, want the copied document's 2", len(chunks))
	}
}

// BenchCopyShared measures [datachat.ShareStore.CopyShared] of a
// conversation of n questions and answers (each answer with two tool calls
// and its parts) and a document of n chunks, on a store open makes.
func BenchCopyShared(b *testing.B, n int, open func(b *testing.B) datachat.Store) {
	ctx := b.Context()
	s := open(b)
	alice, err := s.EnsureUser(ctx, "alice")
	if err != nil {
		b.Fatal(err)
	}
	bob, err := s.EnsureUser(ctx, "bob")
	if err != nil {
		b.Fatal(err)
	}
	c := &datachat.Conversation{UserID: alice.ID, Title: "long"}
	if err := s.CreateConversation(ctx, c); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		q := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Status: datachat.StatusComplete, Content: fmt.Sprintf("Question %d?", i)}
		a := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
		for _, m := range []*datachat.Message{q, a} {
			if err := s.CreateMessage(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		for j := range 2 {
			if err := s.CreateToolCall(ctx, &datachat.ToolCall{MessageID: a.ID, Seq: j + 1, CallID: fmt.Sprintf("c%d", j), Tool: datachat.ToolExecuteSQL,
				Args: json.RawMessage(`{"query":"SELECT count(*) FROM penguins"}`), OK: true, Result: strings.Repeat("row,", 100)}); err != nil {
				b.Fatal(err)
			}
		}
		a.Status, a.Content = datachat.StatusComplete, strings.Repeat("An answer. ", 40)
		a.Parts = []datachat.Part{{Type: datachat.PartToolCall, CallID: "c0"}, {Type: datachat.PartToolCall, CallID: "c1"}, {Type: datachat.PartText, Text: a.Content}}
		if err := s.FinishMessage(ctx, a, nil); err != nil {
			b.Fatal(err)
		}
	}
	doc := &datachat.Document{ConversationID: c.ID, Name: "report.pdf"}
	chunks := make([]*datachat.Chunk, n)
	for i := range chunks {
		chunks[i] = &datachat.Chunk{Seq: i, Text: strings.Repeat("text ", 150)}
	}
	if err := s.CreateDocument(ctx, doc, chunks); err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.CreateShares(ctx, alice.ID, c.ID, []string{"bob"}, false); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.CopyShared(ctx, datachat.ShareCopy{ViewerID: bob.ID, ConversationID: c.ID, Title: "copy", Documents: []string{doc.ID}}); err != nil {
			b.Fatal(err)
		}
	}
}
