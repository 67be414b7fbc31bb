package server

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"datachat"
	"datachat/internal/sampledata"
)

// sampleLocks makes the check for a conversation's sample and its adding
// one step, so that two quick clicks add it once; other conversations' clicks
// do not wait (an ingest may queue behind other uploads).
var sampleLocks = keyedMutex{m: map[string]*keyedEntry{}}

// keyedMutex is a mutex per key, each kept only while it is held or awaited.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	sync.Mutex
	n int // holders and waiters
}

// lock locks key and returns its unlock.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.n++
	k.mu.Unlock()
	e.Lock()
	return func() {
		e.Unlock()
		k.mu.Lock()
		if e.n--; e.n == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// addSample adds datachat's sample data (package sampledata) to the
// request's conversation through the same ingest as an upload: the dataset
// as table "sales" and its guide as a document. What the conversation holds
// already is not added again: 201 with what was added, or 200 saying the
// sample is there; either way with the sample's dataset and document.
func (s *Server) addSample(w http.ResponseWriter, r *http.Request) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	defer sampleLocks.lock(conv.ID)()
	ctx := r.Context()
	datasets, err := s.Workspace.Datasets(ctx, conv.ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	documents, err := s.Workspace.Documents(ctx, conv.ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	var ds []*datachat.Dataset
	for _, d := range datasets {
		if d.Source == sampledata.DatasetFile {
			ds = append(ds, d)
		}
	}
	var docs []*datachat.Document
	for _, d := range documents {
		if d.Name == sampledata.DocumentFile {
			docs = append(docs, d)
		}
	}
	var added []string // what this request adds, for the message
	if len(ds) == 0 {
		added = append(added, "table "+sampledata.Table)
	}
	if len(docs) == 0 {
		added = append(added, "document "+sampledata.DocumentFile)
	}
	if len(added) > 0 {
		if err := s.budgets.uploads.take(conv.UserID); err != nil {
			s.error(w, r, err)
			return
		}
	}
	if len(ds) == 0 {
		if ds, err = s.Workspace.AddUpload(ctx, conv.ID, bytes.NewReader(sampledata.CSV()), sampledata.DatasetFile, sampledata.Table); err != nil {
			s.error(w, r, err)
			return
		}
	}
	if len(docs) == 0 {
		d, err := s.Workspace.AddDocument(ctx, conv.ID, bytes.NewReader(sampledata.Guide()), sampledata.DocumentFile, nil)
		if err != nil {
			s.error(w, r, err)
			return
		}
		docs = []*datachat.Document{d}
	}
	status, msg := http.StatusOK, fmt.Sprintf("The sample data is already in this conversation: table %s and document %s.", ds[0].Name, docs[0].Name)
	if len(added) > 0 {
		added[0] = strings.Replace(added[0], "table "+sampledata.Table, "table "+ds[0].Name, 1) // the name it was given
		status, msg = http.StatusCreated, fmt.Sprintf("Added the sample data: %s. Ask a question about it.", strings.Join(added, " and "))
	}
	writeJSON(w, status, struct {
		Added     bool                 `json:"added"`
		Message   string               `json:"message"`
		Datasets  []*datachat.Dataset  `json:"datasets"`
		Documents []*datachat.Document `json:"documents"`
	}{len(added) > 0, msg, ds, docs})
}
