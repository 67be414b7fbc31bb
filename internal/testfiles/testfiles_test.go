package testfiles_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"datachat"
	"datachat/internal/extract"
	"datachat/internal/llmtest"
	"datachat/internal/retrieval"
	"datachat/internal/testfiles"
)

// TestPenguins checks the facts testfiles exports against the CSV, read
// with encoding/csv.
func TestPenguins(t *testing.T) {
	rows, err := csv.NewReader(bytes.NewReader(testfiles.PenguinsCSV())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rows[0]); got != "[species island bill_length_mm bill_depth_mm flipper_length_mm body_mass_g sex]" {
		t.Errorf("header %s", got)
	}
	rows = rows[1:]
	if len(rows) != testfiles.PenguinsRows {
		t.Errorf("%d rows, want %d", len(rows), testfiles.PenguinsRows)
	}
	count := map[string]int{}
	sex := map[string]int{}
	adelieMass, mass, masses, blank := 0, 0, 0, 0
	for i, r := range rows {
		count[r[0]]++
		sex[r[6]]++
		if r[2] == "" {
			blank++
			if r[3]+r[4]+r[5]+r[6] != "" {
				t.Errorf("row %d: %v, want no measurements and no sex", i, r)
			}
			continue
		}
		for _, f := range r[2:4] {
			if v, err := strconv.ParseFloat(f, 64); err != nil || v < 10 || v > 60 {
				t.Errorf("row %d: bill measurement %q", i, f)
			}
		}
		for _, f := range r[4:6] {
			if _, err := strconv.Atoi(f); err != nil {
				t.Errorf("row %d: %q is not an integer", i, f)
			}
		}
		m, _ := strconv.Atoi(r[5])
		mass += m
		masses++
		if r[0] == "Adelie" {
			adelieMass += m
		}
	}
	for name, want := range map[string]int{"Adelie": testfiles.AdelieCount, "Chinstrap": testfiles.ChinstrapCount, "Gentoo": testfiles.GentooCount} {
		if count[name] != want {
			t.Errorf("%s: %d, want %d", name, count[name], want)
		}
	}
	if len(count) != 3 {
		t.Errorf("species %v", count)
	}
	if adelieMass != testfiles.AdelieBodyMass {
		t.Errorf("Adelie body mass %d, want %d", adelieMass, testfiles.AdelieBodyMass)
	}
	if mean := math.Round(float64(mass) / float64(masses)); mean != testfiles.MeanBodyMass {
		t.Errorf("mean body mass %v, want %d", mean, testfiles.MeanBodyMass)
	}
	if sex["FEMALE"] != testfiles.FemaleCount || sex["MALE"] != testfiles.MaleCount || sex[""] != testfiles.UnknownSex || len(sex) != 3 {
		t.Errorf("sexes %v", sex)
	}
	if blank != 2 {
		t.Errorf("%d rows without measurements, want 2", blank)
	}
}

// TestDeterministic: the same bytes on every call.
func TestDeterministic(t *testing.T) {
	for name, f := range map[string]func() []byte{
		"dmca": testfiles.DMCAPDF, "guide": testfiles.GuidePDF, "locked": testfiles.LockedPDF, "trip": testfiles.TripDOCX,
	} {
		if !bytes.Equal(f(), f()) {
			t.Errorf("%s differs between calls", name)
		}
	}
}

// fakeEmbedder embeds as the llmtest fake servers do.
type fakeEmbedder int

func (dim fakeEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, s := range texts {
		out[i] = llmtest.Vector(s, int(dim))
	}
	return out, nil
}

// TestDMCAAnswerPage: searched for testfiles.DMCAQuestion, the chunks of the
// answer page come first, by full text, by full text and vectors together,
// and by the fake vectors alone (as Chroma ranks them).
func TestDMCAAnswerPage(t *testing.T) {
	ctx := context.Background()
	ex, err := extract.Extract(ctx, bytes.NewReader(testfiles.DMCAPDF()), testfiles.DMCAName, 100<<20)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Pages != testfiles.DMCAPages {
		t.Fatalf("%d pages, want %d", ex.Pages, testfiles.DMCAPages)
	}
	chunks := retrieval.Chunk(ex, "dmca", retrieval.ChunkOptions{})
	t.Logf("%d bytes of text, %d chunks", ex.TextLen(), len(chunks))

	for _, emb := range []retrieval.Embedder{nil, fakeEmbedder(256)} {
		name := "full text"
		if emb != nil {
			name = "hybrid"
		}
		t.Run(name, func(t *testing.T) {
			ix, err := retrieval.Open(ctx, retrieval.Options{Path: filepath.Join(t.TempDir(), "index.db"), Embedder: emb})
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			doc := &datachat.Document{ID: "dmca", ConversationID: "c", Name: testfiles.DMCAName, MediaType: ex.MediaType, Pages: ex.Pages, Chunks: len(chunks)}
			if err := ix.Add(ctx, "c", doc, chunks); err != nil {
				t.Fatal(err)
			}
			res, err := ix.Search(ctx, "c", testfiles.DMCAQuestion, 5, nil)
			if err != nil {
				t.Fatal(err)
			}
			var pages []any
			for _, s := range res {
				pages = append(pages, s.Metadata["page"])
			}
			if len(res) == 0 || fmt.Sprint(pages[0]) != fmt.Sprint(testfiles.DMCAAnswerPage) {
				t.Errorf("pages of the top 5: %v, want %d first", pages, testfiles.DMCAAnswerPage)
			}
		})
	}

	t.Run("vectors", func(t *testing.T) {
		q := llmtest.Vector(testfiles.DMCAQuestion, 256)
		type scored struct {
			page int
			sim  float64
		}
		var all []scored
		for _, c := range chunks {
			text := c.Text
			if c.Heading != "" {
				text = c.Heading + "\n\n" + text
			}
			v := llmtest.Vector(text, 256)
			var dot float64
			for i := range v {
				dot += float64(v[i]) * float64(q[i])
			}
			all = append(all, scored{c.Page, dot})
		}
		slices.SortFunc(all, func(a, b scored) int { return -cmpFloat(a.sim, b.sim) })
		if all[0].page != testfiles.DMCAAnswerPage {
			t.Errorf("nearest chunks: %v, want page %d first", all[:min(5, len(all))], testfiles.DMCAAnswerPage)
		}
	})
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b || math.IsNaN(a):
		return -1
	case a > b:
		return 1
	}
	return 0
}
