package storetest

import (
	"strings"
	"testing"
	"time"

	"datachat"
)

func ptr[T any](v T) *T { return &v }

func testDictionary(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")

	c := mustConversation(t, s, alice.ID)
	sw := &datachat.Dataset{ConversationID: c.ID, Name: "starwars", Source: "StarWars.csv",
		Columns: []datachat.Column{
			{Name: "name", Type: "text", SQLType: "VARCHAR", Description: "ignored"},
			{Name: "height", Type: "integer", SQLType: "BIGINT"},
			{Name: "mass", Type: "decimal", SQLType: "DECIMAL(10,2)"},
		}}
	planets := &datachat.Dataset{ConversationID: c.ID, Name: "planets", Columns: []datachat.Column{{Name: "id", Type: "integer", SQLType: "INTEGER"}}}
	for _, d := range []*datachat.Dataset{sw, planets} {
		if err := s.CreateDataset(ctx, d); err != nil {
			t.Fatalf("CreateDataset: %v", err)
		}
	}
	// Notes alone; the conversation's UpdatedAt does not move.
	if err := s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{Notes: ptr("  Revenue excludes refunds.\n")}); err != nil {
		t.Fatalf("UpdateDictionary(notes): %v", err)
	}
	got, err := s.Conversation(ctx, alice.ID, c.ID)
	if err != nil {
		t.Fatalf("Conversation: %v", err)
	}
	if got.Notes != "Revenue excludes refunds." {
		t.Errorf("Notes: got %q, want %q (trimmed)", got.Notes, "Revenue excludes refunds.")
	}
	if !got.UpdatedAt.Equal(c.UpdatedAt) {
		t.Errorf("UpdatedAt after changing the notes: got %v, want %v unchanged", got.UpdatedAt, c.UpdatedAt)
	}

	// Descriptions merge: a column named in another case is the dataset's,
	// an empty description removes one, columns not named keep theirs.
	err = s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{Datasets: map[string]datachat.DatasetDictionary{
		"StarWars": {Description: ptr("People of the saga."), Columns: map[string]string{"Height": "In centimetres.", "mass": "In kilograms."}},
	}})
	if err != nil {
		t.Fatalf("UpdateDictionary(datasets): %v", err)
	}
	err = s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{Datasets: map[string]datachat.DatasetDictionary{
		"starwars": {Columns: map[string]string{"mass": ""}},
		"planets":  {Description: ptr("Planets.")},
	}})
	if err != nil {
		t.Fatalf("UpdateDictionary(merge): %v", err)
	}
	list, err := s.Datasets(ctx, c.ID)
	if err != nil {
		t.Fatalf("Datasets: %v", err)
	}
	sw.Description = "People of the saga."
	sw.Columns[1].Description = "In centimetres."
	// Set apart from the columns, and not on CreateDataset: name's was
	// not stored.
	sw.Columns[0].Description = ""
	planets.Description = "Planets."
	equal(t, "Datasets after two changes", list, []*datachat.Dataset{sw, planets})

	// A change naming what the conversation lacks changes nothing, the
	// notes included, and says what is unknown.
	err = s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{Notes: ptr("changed"), Datasets: map[string]datachat.DatasetDictionary{
		"starwars": {Description: ptr("changed"), Columns: map[string]string{"weight": "x", "height": "changed"}},
		"pengiuns": {Description: ptr("x")},
	}})
	wantCode(t, "UpdateDictionary naming an unknown table and column", err, datachat.EINVALID)
	if msg := datachat.ErrorMessage(err); !strings.Contains(msg, `"pengiuns"`) || !strings.Contains(msg, `"weight"`) {
		t.Errorf("UpdateDictionary's error %q does not name the unknown table and column", msg)
	}
	list, err = s.Datasets(ctx, c.ID)
	if err != nil {
		t.Fatalf("Datasets: %v", err)
	}
	equal(t, "Datasets after a refused change", list, []*datachat.Dataset{sw, planets})
	got, _ = s.Conversation(ctx, alice.ID, c.ID)
	if got.Notes != "Revenue excludes refunds." {
		t.Errorf("Notes after a refused change: got %q", got.Notes)
	}

	long := strings.Repeat("é", datachat.MaxNotesChars+1)
	wantCode(t, "UpdateDictionary with notes too long", s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{Notes: &long}), datachat.EINVALID)
	long = strings.Repeat("x", datachat.MaxDescriptionChars+1)
	wantCode(t, "UpdateDictionary with a description too long", s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{
		Datasets: map[string]datachat.DatasetDictionary{"planets": {Columns: map[string]string{"id": long}}}}), datachat.EINVALID)
	wantCode(t, "UpdateDictionary of another user's conversation", s.UpdateDictionary(ctx, bob.ID, c.ID, datachat.Dictionary{Notes: ptr("x")}), datachat.ENOTFOUND)
	wantCode(t, "UpdateDictionary of an unknown conversation", s.UpdateDictionary(ctx, alice.ID, "no-such-conversation", datachat.Dictionary{Notes: ptr("x")}), datachat.ENOTFOUND)

	// An empty description removes the dataset's.
	if err := s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{Notes: ptr(""), Datasets: map[string]datachat.DatasetDictionary{"planets": {Description: ptr("")}}}); err != nil {
		t.Fatalf("UpdateDictionary(clear): %v", err)
	}
	gotDS, _ := s.Dataset(ctx, c.ID, planets.ID)
	got, _ = s.Conversation(ctx, alice.ID, c.ID)
	if gotDS.Description != "" || got.Notes != "" {
		t.Errorf("after clearing: description %q, notes %q, want both empty", gotDS.Description, got.Notes)
	}
}

func testExamples(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	c := mustConversation(t, s, alice.ID)

	sig := []datachat.TableSignature{{Name: "penguins", Columns: []datachat.SignatureColumn{
		{Name: "body_mass_g", Type: "BIGINT"}, {Name: "species", Type: "VARCHAR"}}}}
	e1 := &datachat.Example{UserID: alice.ID, Question: "How many penguins per species?",
		SQL: "SELECT species, count(*) FROM penguins GROUP BY species", Verdict: datachat.VerdictCorrect, Tables: sig,
		ConversationID: c.ID, MessageID: "m1", CallID: "call_1", CreatedAt: base}
	if err := s.SaveExample(ctx, e1); err != nil {
		t.Fatalf("SaveExample: %v", err)
	}
	if e1.ID == "" {
		t.Fatalf("SaveExample: got no ID")
	}
	checkTime(t, "example CreatedAt", e1.CreatedAt, base)
	e2 := &datachat.Example{UserID: alice.ID, Question: "Heaviest?", SQL: "SELECT max(body_mass_g) FROM penguins",
		Verdict: datachat.VerdictCorrect, CreatedAt: base.Add(time.Minute)}
	if err := s.SaveExample(ctx, e2); err != nil {
		t.Fatalf("SaveExample without a message: %v", err)
	}
	if e2.Tables == nil || len(e2.Tables) != 0 {
		t.Errorf("SaveExample without tables: Tables %#v, want an empty slice", e2.Tables)
	}
	e3 := &datachat.Example{UserID: alice.ID, Question: "Heaviest?", SQL: "SELECT 1", Verdict: datachat.VerdictWrong,
		CreatedAt: base.Add(2 * time.Minute)}
	if err := s.SaveExample(ctx, e3); err != nil {
		t.Fatalf("SaveExample of a second example without a message: %v", err)
	}
	if e3.ID == e2.ID {
		t.Errorf("examples without a message replaced one another")
	}
	list, err := s.Examples(ctx, alice.ID)
	if err != nil {
		t.Fatalf("Examples: %v", err)
	}
	equal(t, "Examples (newest first)", list, []*datachat.Example{e3, e2, e1})

	// Marking the same tool call again replaces the example, keeping its ID.
	again := &datachat.Example{UserID: alice.ID, Question: e1.Question, SQL: "SELECT species FROM penguins",
		Verdict: datachat.VerdictWrong, Tables: sig, ConversationID: c.ID, MessageID: "m1", CallID: "call_1",
		CreatedAt: base.Add(3 * time.Minute)}
	if err := s.SaveExample(ctx, again); err != nil {
		t.Fatalf("SaveExample of the same call: %v", err)
	}
	if again.ID != e1.ID {
		t.Errorf("SaveExample of the same call: got ID %q, want the first one's %q", again.ID, e1.ID)
	}
	list, err = s.Examples(ctx, alice.ID)
	if err != nil {
		t.Fatalf("Examples: %v", err)
	}
	equal(t, "Examples after replacing one", list, []*datachat.Example{again, e3, e2})

	// Another user's call of the same ids is another example.
	theirs := &datachat.Example{UserID: bob.ID, Question: "q", SQL: "SELECT 2", Verdict: datachat.VerdictCorrect, MessageID: "m1", CallID: "call_1"}
	if err := s.SaveExample(ctx, theirs); err != nil {
		t.Fatalf("SaveExample of another user: %v", err)
	}
	if theirs.ID == e1.ID {
		t.Errorf("another user's example replaced alice's")
	}
	list, _ = s.Examples(ctx, bob.ID)
	equal(t, "bob's Examples", list, []*datachat.Example{theirs})

	wantCode(t, "SaveExample with a bad verdict", s.SaveExample(ctx, &datachat.Example{UserID: alice.ID, SQL: "SELECT 1", Verdict: "maybe"}), datachat.EINVALID)
	wantCode(t, "SaveExample of an unknown user", s.SaveExample(ctx, &datachat.Example{UserID: "no-such-user", SQL: "SELECT 1", Verdict: datachat.VerdictCorrect}), datachat.ENOTFOUND)
	wantCode(t, "DeleteExample of another user's", s.DeleteExample(ctx, bob.ID, e2.ID), datachat.ENOTFOUND)

	// Examples outlive the conversation they were marked in.
	if err := s.DeleteConversation(ctx, alice.ID, c.ID); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	if err := s.DeleteExample(ctx, alice.ID, e2.ID); err != nil {
		t.Fatalf("DeleteExample: %v", err)
	}
	wantCode(t, "DeleteExample twice", s.DeleteExample(ctx, alice.ID, e2.ID), datachat.ENOTFOUND)
	list, err = s.Examples(ctx, alice.ID)
	if err != nil {
		t.Fatalf("Examples: %v", err)
	}
	equal(t, "Examples after a delete and the conversation's", list, []*datachat.Example{again, e3})
}
