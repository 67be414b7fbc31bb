package storetest

import (
	"reflect"
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

func testSemanticLayer(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	c := mustConversation(t, s, alice.ID)
	orders := &datachat.Dataset{ConversationID: c.ID, Name: "orders", Columns: []datachat.Column{
		{Name: "amount", Type: "decimal", SQLType: "DECIMAL(10,2)"}, {Name: "status", Type: "text", SQLType: "VARCHAR"},
		{Name: "customer", Type: "text", SQLType: "VARCHAR"}, {Name: "region", Type: "text", SQLType: "VARCHAR"}}}
	customers := &datachat.Dataset{ConversationID: c.ID, Name: "customers", Columns: []datachat.Column{{Name: "code", Type: "text", SQLType: "VARCHAR"}}}
	for _, d := range []*datachat.Dataset{orders, customers} {
		if err := s.CreateDataset(ctx, d); err != nil {
			t.Fatalf("CreateDataset: %v", err)
		}
	}
	if l, err := s.SemanticLayer(ctx, c.ID); err != nil || len(l.Datasets) != 0 || len(l.Sources) != 0 {
		t.Fatalf("SemanticLayer before any: %+v, %v; want an empty one", l, err)
	}
	rels := []datachat.ForeignKey{{Columns: []string{"Customer"}, RefTable: "CUSTOMERS", RefColumns: []string{"code"}}}
	err := s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{
		Datasets: map[string]datachat.DatasetDictionary{"orders": {
			Metrics:       map[string]datachat.Metric{"revenue": {SQL: " sum(amount) ", Filter: "status = 'paid'", Description: "Paid orders only."}, "orders": {SQL: "count(*)"}},
			Synonyms:      map[string]string{"EMEA": "region IN ('DE', 'FR')", "sales": "revenue"},
			Relationships: &rels,
		}},
		Sources: map[string]map[string]datachat.DatasetDictionary{"warehouse": {"billing.invoices": {
			Description: ptr("One row per invoice."), Columns: map[string]string{"total_due": "In euros."},
			Metrics: map[string]datachat.Metric{"overdue": {SQL: "sum(total_due)", Filter: "status = 'overdue'"}},
		}}},
	})
	if err != nil {
		t.Fatalf("UpdateDictionary(semantic layer): %v", err)
	}
	l, err := s.SemanticLayer(ctx, c.ID)
	if err != nil {
		t.Fatalf("SemanticLayer: %v", err)
	}
	equal(t, "the dataset's semantics", l.Datasets[orders.ID], datachat.TableSemantics{
		Metrics:       map[string]datachat.Metric{"revenue": {SQL: "sum(amount)", Filter: "status = 'paid'", Description: "Paid orders only."}, "orders": {SQL: "count(*)"}},
		Synonyms:      map[string]string{"EMEA": "region IN ('DE', 'FR')", "sales": "revenue"},
		Relationships: []datachat.ForeignKey{{Columns: []string{"customer"}, RefTable: "customers", RefColumns: []string{"code"}}},
	})
	equal(t, "the source table's semantics", l.Sources["warehouse"]["billing.invoices"], datachat.TableSemantics{
		Description: "One row per invoice.", Columns: map[string]string{"total_due": "In euros."},
		Metrics: map[string]datachat.Metric{"overdue": {SQL: "sum(total_due)", Filter: "status = 'overdue'"}},
	})

	// Changes merge: a metric replaced, one removed by an empty sql, a
	// synonym removed, the relationships kept when not given; a source
	// table emptied is gone.
	err = s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{
		Datasets: map[string]datachat.DatasetDictionary{"orders": {
			Metrics:  map[string]datachat.Metric{"revenue": {SQL: "sum(amount)"}, "orders": {SQL: ""}},
			Synonyms: map[string]string{"sales": ""},
		}},
		Sources: map[string]map[string]datachat.DatasetDictionary{"warehouse": {"billing.invoices": {
			Description: ptr(""), Columns: map[string]string{"total_due": ""}, Metrics: map[string]datachat.Metric{"overdue": {}},
		}}},
	})
	if err != nil {
		t.Fatalf("UpdateDictionary(merge): %v", err)
	}
	l, _ = s.SemanticLayer(ctx, c.ID)
	equal(t, "the dataset's semantics after a merge", l.Datasets[orders.ID], datachat.TableSemantics{
		Metrics:       map[string]datachat.Metric{"revenue": {SQL: "sum(amount)"}},
		Synonyms:      map[string]string{"EMEA": "region IN ('DE', 'FR')"},
		Relationships: []datachat.ForeignKey{{Columns: []string{"customer"}, RefTable: "customers", RefColumns: []string{"code"}}},
	})
	if len(l.Sources) != 0 {
		t.Errorf("sources after emptying their table: %+v, want none", l.Sources)
	}

	// A relationship to what the conversation lacks changes nothing, and
	// says what.
	bad := []datachat.ForeignKey{{Columns: []string{"customer"}, RefTable: "clients", RefColumns: []string{"code"}}}
	err = s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{Datasets: map[string]datachat.DatasetDictionary{"orders": {
		Relationships: &bad, Metrics: map[string]datachat.Metric{"x; DROP": {SQL: "1"}}}}})
	wantCode(t, "UpdateDictionary with a bad relationship and metric name", err, datachat.EINVALID)
	if msg := datachat.ErrorMessage(err); !strings.Contains(msg, `"clients"`) || !strings.Contains(msg, `"x; DROP"`) {
		t.Errorf("the error %q does not name the relationship's table and the metric", msg)
	}
	if l2, _ := s.SemanticLayer(ctx, c.ID); !reflect.DeepEqual(l2, l) {
		t.Errorf("the layer changed after a refused change: %+v", l2)
	}
	wantCode(t, "UpdateDictionary of another user's layer", s.UpdateDictionary(ctx, bob.ID, c.ID, datachat.Dictionary{
		Datasets: map[string]datachat.DatasetDictionary{"orders": {Synonyms: map[string]string{"x": "y"}}}}), datachat.ENOTFOUND)

	// Relationships given empty remove them; a deleted dataset's semantics
	// go at the next change; a deleted conversation's layer goes with it.
	none := []datachat.ForeignKey{}
	if err := s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{Datasets: map[string]datachat.DatasetDictionary{
		"customers": {Synonyms: map[string]string{"client": "a customer"}}, "orders": {Relationships: &none}}}); err != nil {
		t.Fatalf("UpdateDictionary: %v", err)
	}
	l, _ = s.SemanticLayer(ctx, c.ID)
	if len(l.Datasets[orders.ID].Relationships) != 0 || l.Datasets[customers.ID].Synonyms["client"] != "a customer" {
		t.Errorf("after removing the relationships: %+v", l.Datasets)
	}
	if err := s.DeleteDataset(ctx, c.ID, orders.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateDictionary(ctx, alice.ID, c.ID, datachat.Dictionary{Datasets: map[string]datachat.DatasetDictionary{
		"customers": {Synonyms: map[string]string{"buyer": "a customer"}}}}); err != nil {
		t.Fatalf("UpdateDictionary: %v", err)
	}
	if l, _ = s.SemanticLayer(ctx, c.ID); len(l.Datasets) != 1 {
		t.Errorf("after deleting orders: %+v, want customers' alone", l.Datasets)
	}
	if err := s.DeleteConversation(ctx, alice.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	if l, err = s.SemanticLayer(ctx, c.ID); err != nil || len(l.Datasets) != 0 {
		t.Errorf("after deleting the conversation: %+v, %v", l, err)
	}
}
