package storetest

import (
	"testing"

	"datachat"
)

func testDatasets(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	other := mustConversation(t, s, alice.ID)

	list, err := s.Datasets(ctx, c.ID)
	wantEmpty(t, "Datasets of an empty conversation", list, err)

	d1 := &datachat.Dataset{ConversationID: c.ID, Name: "starwars", Source: "StarWars.csv", Format: "parquet",
		Path: "datasets/x/starwars.parquet", RowCount: 87, Bytes: 12345, CreatedAt: base,
		Columns: []datachat.Column{
			{Name: "name", Type: "text", SQLType: "VARCHAR"},
			{Name: "height", Type: "integer", SQLType: "BIGINT"},
			{Name: "mass", Type: "decimal", SQLType: "DECIMAL(10,2)"},
		}}
	d2 := &datachat.Dataset{ConversationID: c.ID, Name: "alltypes_plain_snappy",
		Source: "https://example.com/alltypes_plain.snappy.parquet", Format: "parquet", Path: "datasets/y.parquet",
		Columns: []datachat.Column{{Name: "id", Type: "integer", SQLType: "INTEGER"}}}
	for _, d := range []*datachat.Dataset{d1, d2} {
		if err := s.CreateDataset(ctx, d); err != nil {
			t.Fatalf("CreateDataset: %v", err)
		}
		if d.ID == "" || d.CreatedAt.IsZero() {
			t.Fatalf("CreateDataset: got ID %q, CreatedAt %v, want both filled in", d.ID, d.CreatedAt)
		}
	}
	checkTime(t, "dataset CreatedAt", d1.CreatedAt, base)

	list, err = s.Datasets(ctx, c.ID)
	if err != nil {
		t.Fatalf("Datasets: %v", err)
	}
	equal(t, "Datasets", list, []*datachat.Dataset{d1, d2})
	got, err := s.Dataset(ctx, c.ID, d1.ID)
	if err != nil {
		t.Fatalf("Dataset: %v", err)
	}
	equal(t, "Dataset", got, d1)

	wantCode(t, "CreateDataset with a name already used", s.CreateDataset(ctx,
		&datachat.Dataset{ConversationID: c.ID, Name: "starwars"}), datachat.ECONFLICT)
	if err := s.CreateDataset(ctx, &datachat.Dataset{ConversationID: other.ID, Name: "starwars"}); err != nil {
		t.Errorf("CreateDataset with the same name in another conversation: got %v, want nil", err)
	}
	wantCode(t, "CreateDataset in an unknown conversation", s.CreateDataset(ctx,
		&datachat.Dataset{ConversationID: "no-such-conversation", Name: "x"}), datachat.ENOTFOUND)
	_, err = s.Dataset(ctx, other.ID, d1.ID)
	wantCode(t, "Dataset through another conversation", err, datachat.ENOTFOUND)
	_, err = s.Dataset(ctx, c.ID, "no-such-dataset")
	wantCode(t, "Dataset of an unknown id", err, datachat.ENOTFOUND)
	wantCode(t, "DeleteDataset through another conversation", s.DeleteDataset(ctx, other.ID, d1.ID), datachat.ENOTFOUND)

	if err := s.DeleteDataset(ctx, c.ID, d1.ID); err != nil {
		t.Fatalf("DeleteDataset: %v", err)
	}
	_, err = s.Dataset(ctx, c.ID, d1.ID)
	wantCode(t, "Dataset after delete", err, datachat.ENOTFOUND)
	wantCode(t, "DeleteDataset twice", s.DeleteDataset(ctx, c.ID, d1.ID), datachat.ENOTFOUND)
	list, err = s.Datasets(ctx, c.ID)
	if err != nil {
		t.Fatalf("Datasets: %v", err)
	}
	equal(t, "Datasets after delete", list, []*datachat.Dataset{d2})
}

func testDocuments(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	other := mustConversation(t, s, alice.ID)

	doc1 := &datachat.Document{ConversationID: c.ID, Name: "report.pdf", MediaType: "application/pdf",
		Pages: 3, Bytes: 4096, CreatedAt: base,
		Metadata: map[string]string{"department": "finance", "year": "2024"}}
	chunks1 := []*datachat.Chunk{
		{Seq: 0, Page: 1, Heading: "Intro", Start: 0, End: 100, Text: "first chunk"},
		{Seq: 1, Page: 2, Start: 100, End: 250, Text: "second chunk ✓"},
		{Seq: 2, Page: 3, Heading: "End", Start: 250, End: 300, Text: "third chunk"},
	}
	if err := s.CreateDocument(ctx, doc1, chunks1); err != nil {
		t.Fatalf("CreateDocument: %v", err)
	}
	if doc1.ID == "" {
		t.Fatalf("CreateDocument: got empty ID, want one filled in")
	}
	checkTime(t, "document CreatedAt", doc1.CreatedAt, base)
	for _, ch := range chunks1 {
		if ch.ID == "" || ch.DocumentID != doc1.ID {
			t.Fatalf("CreateDocument chunk: got ID %q, DocumentID %q, want an ID and %q", ch.ID, ch.DocumentID, doc1.ID)
		}
	}
	doc2 := &datachat.Document{ConversationID: c.ID, Name: "notes.md", MediaType: "text/markdown", Chunks: 2}
	chunks2 := []*datachat.Chunk{
		{Seq: 1, Start: 10, End: 20, Text: "b"},
		{Seq: 0, Start: 0, End: 10, Text: "a"},
	}
	if err := s.CreateDocument(ctx, doc2, chunks2); err != nil {
		t.Fatalf("CreateDocument: %v", err)
	}

	docs, err := s.Documents(ctx, c.ID)
	if err != nil {
		t.Fatalf("Documents: %v", err)
	}
	equal(t, "Documents", docs, []*datachat.Document{doc1, doc2})
	if docs[0].Chunks != 3 {
		t.Errorf("Document.Chunks: got %d, want 3", docs[0].Chunks)
	}
	got, err := s.Document(ctx, c.ID, doc1.ID)
	if err != nil {
		t.Fatalf("Document: %v", err)
	}
	equal(t, "Document", got, doc1)

	chunks, err := s.Chunks(ctx, c.ID)
	if err != nil {
		t.Fatalf("Chunks: %v", err)
	}
	equal(t, "Chunks", chunks, []*datachat.Chunk{chunks1[0], chunks1[1], chunks1[2], chunks2[1], chunks2[0]})
	chunks, err = s.Chunks(ctx, other.ID)
	wantEmpty(t, "Chunks of a conversation without documents", chunks, err)

	_, err = s.Document(ctx, other.ID, doc1.ID)
	wantCode(t, "Document through another conversation", err, datachat.ENOTFOUND)
	wantCode(t, "DeleteDocument through another conversation", s.DeleteDocument(ctx, other.ID, doc1.ID), datachat.ENOTFOUND)
	wantCode(t, "CreateDocument in an unknown conversation", s.CreateDocument(ctx,
		&datachat.Document{ConversationID: "no-such-conversation", Name: "x"},
		[]*datachat.Chunk{{Text: "x"}}), datachat.ENOTFOUND)

	if err := s.DeleteDocument(ctx, c.ID, doc1.ID); err != nil {
		t.Fatalf("DeleteDocument: %v", err)
	}
	_, err = s.Document(ctx, c.ID, doc1.ID)
	wantCode(t, "Document after delete", err, datachat.ENOTFOUND)
	wantCode(t, "DeleteDocument twice", s.DeleteDocument(ctx, c.ID, doc1.ID), datachat.ENOTFOUND)
	chunks, err = s.Chunks(ctx, c.ID)
	if err != nil {
		t.Fatalf("Chunks: %v", err)
	}
	equal(t, "Chunks after deleting a document", chunks, []*datachat.Chunk{chunks2[1], chunks2[0]})
}

func testHasDocuments(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	other := mustConversation(t, s, alice.ID)
	has := func(what, conversationID string, want bool) {
		t.Helper()
		got, err := s.HasDocuments(ctx, conversationID)
		if err != nil {
			t.Fatalf("HasDocuments %s: %v", what, err)
		}
		if got != want {
			t.Errorf("HasDocuments %s: got %v, want %v", what, got, want)
		}
	}
	has("of a new conversation", c.ID, false)
	has("of an unknown conversation", "no-such-conversation", false)
	var docs []*datachat.Document
	for _, name := range []string{"a.pdf", "b.pdf"} {
		d := &datachat.Document{ConversationID: c.ID, Name: name, MediaType: "application/pdf"}
		if err := s.CreateDocument(ctx, d, []*datachat.Chunk{{Text: "text of " + name}}); err != nil {
			t.Fatalf("CreateDocument: %v", err)
		}
		docs = append(docs, d)
	}
	has("of a conversation with two documents", c.ID, true)
	has("of another conversation", other.ID, false)
	if err := s.DeleteDocument(ctx, c.ID, docs[0].ID); err != nil {
		t.Fatalf("DeleteDocument: %v", err)
	}
	has("after deleting one of two", c.ID, true)
	if err := s.DeleteDocument(ctx, c.ID, docs[1].ID); err != nil {
		t.Fatalf("DeleteDocument: %v", err)
	}
	has("after deleting both", c.ID, false)
}
