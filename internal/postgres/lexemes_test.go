package postgres_test

import (
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"datachat/internal/postgres"
	"datachat/internal/retrieval/backendtest"
)

// TestIndexLexemeCounts adds, re-adds and deletes documents concurrently,
// through the index and through the store, in two conversations, and checks
// that the lexeme counts (migration 0006) are those of a recount of the
// indexed chunks.
func TestIndexLexemeCounts(t *testing.T) {
	dsn := newSchema(t)
	s := mustOpen(t, dsn)
	ix := postgres.NewIndex(s, postgres.IndexOptions{})
	ds := newDocStore(t, s)
	words := strings.Fields("alpha beta gamma delta epsilon zeta theta iota kappa lambda river mountain valley ocean forest")
	text := func(rng *mrand.Rand) string {
		var b strings.Builder
		for range 3 + rng.IntN(8) {
			b.WriteString(words[rng.IntN(len(words))] + " ")
		}
		return b.String()
	}
	convs := []string{"c1", "c2"}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(w), 7))
			for i := range 60 {
				conv := convs[rng.IntN(len(convs))]
				// A worker stores its own documents; any deletes any.
				id := fmt.Sprintf("%s-w%d-d%d", conv, rng.IntN(4), rng.IntN(3))
				switch op := rng.IntN(10); {
				case op < 5: // store (replacing) and index
					id = fmt.Sprintf("%s-w%d-d%d", conv, w, rng.IntN(3))
					var texts []string
					for range 1 + rng.IntN(4) {
						texts = append(texts, text(rng))
					}
					doc, chunks := backendtest.TextDoc(id, nil, texts...)
					ds.store(t, conv, doc, chunks)
					if err := ix.Add(t.Context(), conv, doc, chunks); err != nil && !strings.Contains(err.Error(), "not stored") &&
						!strings.Contains(err.Error(), "replaced") {
						t.Errorf("Add %s: %v", id, err)
					}
				case op < 7:
					if err := ix.DeleteDocument(t.Context(), conv, id); err != nil {
						t.Errorf("DeleteDocument %s: %v", id, err)
					}
				case op < 9:
					_ = s.DeleteDocument(t.Context(), conv, id)
				default:
					if i < 20 { // then 40 more operations
						if err := ix.DeleteConversation(t.Context(), conv); err != nil {
							t.Errorf("DeleteConversation %s: %v", conv, err)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	checkLexemeCounts(t, dsn)
}

// TestIndexLexemeCountsMigrate: migration 0006 counts what was indexed
// before it.
func TestIndexLexemeCountsMigrate(t *testing.T) {
	dsn := newSchema(t)
	s := mustOpenAt(t, dsn, "0005_message_sources.sql")
	// Indexed as 0003 to 0005 did: tsv set, no counts.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	ds := newDocStore(t, s)
	for i, conv := range []string{"c1", "c1", "c2"} {
		doc, chunks := backendtest.TextDoc(fmt.Sprintf("d%d", i), nil, "Glaciers carve valleys.", "Rivers carve canyons, glaciers too.")
		ds.store(t, conv, doc, chunks)
		if _, err := conn.Exec(t.Context(), `UPDATE chunks c SET tsv = chunk_tsvector(c.text, c.heading, d.name)
			FROM documents d WHERE d.id = c.document_id AND d.id = $1`, doc.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	checkLexemeCounts(t, dsn)
}

// checkLexemeCounts compares the lexeme counts with a recount of the
// indexed chunks.
func checkLexemeCounts(t *testing.T, dsn string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	read := func(sql string) map[string]int {
		rows, err := conn.Query(t.Context(), sql)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		var conv, lexeme string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&conv, &lexeme, &n}, func() error {
			if n != 0 {
				out[conv+"/"+lexeme] = n
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := read(`SELECT conversation_id, lexeme, chunks FROM chunk_lexemes`)
	want := read(`SELECT d.conversation_id, '', count(*)::int FROM chunks c JOIN documents d ON d.id = c.document_id
			WHERE c.tsv IS NOT NULL GROUP BY 1
		UNION ALL
		SELECT v.id, s.word, s.ndoc FROM conversations v,
			ts_stat(format('SELECT c.tsv FROM chunks c JOIN documents d ON d.id = c.document_id
				WHERE d.conversation_id = %L AND c.tsv IS NOT NULL', v.id)) s`)

	if len(want) == 0 {
		t.Fatal("nothing indexed at the end: the test checks nothing")
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: counted %d, recount %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: counted %d, recount 0", k, n)
		}
	}
}
