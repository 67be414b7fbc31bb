package backendtest_test

import (
	"context"
	"path/filepath"
	"testing"

	"datachat/internal/retrieval"
	"datachat/internal/retrieval/backendtest"
)

func TestEmbedded(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T, emb retrieval.Embedder) retrieval.Backend {
			ix, err := retrieval.Open(context.Background(), retrieval.Options{Path: filepath.Join(t.TempDir(), "index.db"), Embedder: emb})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ix.Close() })
			return ix
		},
	})
}
