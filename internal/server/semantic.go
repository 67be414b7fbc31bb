package server

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"datachat"
)

// The semantic layer as the page's editor reads and writes it, one table at
// a time: GET …/dictionary/tables lists every table of the conversation (its
// datasets, and the tables of its attached sources) with its columns and
// what the dictionary says of it; PATCH …/dictionary/tables changes one
// table's part, merged into what is stored in one transaction, so that two
// saves of two tables keep both. A viewer of a shared conversation reads it
// through GET /api/shared/{id}/dictionary/tables.

// semanticColumn is a column of a table in the editor: its name, its
// friendly type ("" when unknown) and its description.
type semanticColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
}

// semanticTable is one table as the editor shows it. Kind is "dataset"
// (DatasetID set) or "source" (Source set, Name its SCHEMA.TABLE as the
// layer keys it).
type semanticTable struct {
	Kind          string                     `json:"kind"`
	DatasetID     string                     `json:"dataset_id,omitempty"`
	Source        string                     `json:"source,omitempty"`
	Name          string                     `json:"name"`
	Description   string                     `json:"description"`
	Columns       []semanticColumn           `json:"columns"`
	Metrics       map[string]datachat.Metric `json:"metrics"`
	Synonyms      map[string]string          `json:"synonyms"`
	Relationships []datachat.ForeignKey      `json:"relationships"`
	// ForeignKeys are the engine's, from a source's catalog: join hints
	// the model is given anyway, shown beside the relationships.
	ForeignKeys []datachat.ForeignKey `json:"foreign_keys"`
}

// unavailableSource is an attached source whose tables cannot be listed now.
type unavailableSource struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// semanticTables is GET …/dictionary/tables.
type semanticTables struct {
	Tables      []semanticTable     `json:"tables"`
	Unavailable []unavailableSource `json:"unavailable"`
	ReadOnly    bool                `json:"read_only"`
}

func datasetTable(d *datachat.Dataset, sem datachat.TableSemantics) semanticTable {
	t := semanticTable{Kind: "dataset", DatasetID: d.ID, Name: d.Name, Description: d.Description}
	for _, c := range d.Columns {
		t.Columns = append(t.Columns, semanticColumn{Name: c.Name, Type: c.Type, Description: c.Description})
	}
	t.Metrics, t.Synonyms, t.Relationships = sem.Metrics, sem.Synonyms, sem.Relationships
	return t.nonNil()
}

func (t semanticTable) nonNil() semanticTable {
	if t.Columns == nil {
		t.Columns = []semanticColumn{}
	}
	if t.Metrics == nil {
		t.Metrics = map[string]datachat.Metric{}
	}
	if t.Synonyms == nil {
		t.Synonyms = map[string]string{}
	}
	if t.Relationships == nil {
		t.Relationships = []datachat.ForeignKey{}
	}
	if t.ForeignKeys == nil {
		t.ForeignKeys = []datachat.ForeignKey{}
	}
	return t
}

// layerKey is how the semantic layer keys a source's table.
func layerKey(name string) string { return strings.Join(datachat.SplitQualified(name), ".") }

// sourceTable is a source's table (as Sources.Describe gives it, with the
// layer's part already on it) in the editor.
func sourceTable(source string, tb datachat.DBSourceTable) semanticTable {
	t := semanticTable{Kind: "source", Source: source, Name: layerKey(tb.Name), Description: tb.Description,
		Metrics: tb.Metrics, Synonyms: tb.Synonyms, Relationships: tb.Relationships, ForeignKeys: tb.ForeignKeys}
	for _, c := range tb.Columns {
		t.Columns = append(t.Columns, semanticColumn{Name: c.Name, Type: c.Type, Description: c.Description})
	}
	return t.nonNil()
}

// storedSourceTable is a source's table as the layer alone knows it: the
// columns it describes, without their types (a viewer, or a source that
// cannot be read now).
func storedSourceTable(source, key string, sem datachat.TableSemantics) semanticTable {
	t := semanticTable{Kind: "source", Source: source, Name: key, Description: sem.Description,
		Metrics: sem.Metrics, Synonyms: sem.Synonyms, Relationships: sem.Relationships}
	for _, c := range slices.Sorted(maps.Keys(sem.Columns)) {
		t.Columns = append(t.Columns, semanticColumn{Name: c, Description: sem.Columns[c]})
	}
	return t.nonNil()
}

// listSemantic is GET /api/conversations/{id}/dictionary/tables.
func (s *Server) listSemantic(w http.ResponseWriter, r *http.Request) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	out, err := s.semanticTables(r.Context(), conv)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) semanticTables(ctx context.Context, conv *datachat.Conversation) (semanticTables, error) {
	out := semanticTables{Tables: []semanticTable{}, Unavailable: []unavailableSource{}}
	datasets, err := s.Store.Datasets(ctx, conv.ID)
	if err != nil {
		return out, err
	}
	layer, err := s.Store.SemanticLayer(ctx, conv.ID)
	if err != nil {
		return out, err
	}
	for _, d := range datasets {
		out.Tables = append(out.Tables, datasetTable(d, layer.Datasets[d.ID]))
	}
	if s.Sources == nil {
		return out, nil
	}
	infos, err := s.Sources.Describe(ctx, UserFrom(ctx), conv.ID)
	if err != nil {
		return out, err
	}
	for _, info := range infos {
		if info.Unavailable != "" {
			out.Unavailable = append(out.Unavailable, unavailableSource{Name: info.Name, Reason: info.Unavailable})
			stored := layer.Sources[info.Name]
			for _, key := range slices.Sorted(maps.Keys(stored)) {
				out.Tables = append(out.Tables, storedSourceTable(info.Name, key, stored[key]))
			}
			continue
		}
		for _, tb := range info.Tables {
			out.Tables = append(out.Tables, sourceTable(info.Name, tb))
		}
	}
	return out, nil
}

// listSharedSemantic is GET /api/shared/{id}/dictionary/tables: the
// semantic layer of a conversation shared with the user, read-only: its
// datasets', and its sources' tables as the layer holds them for the
// sources both its owner and the viewer may use. 404 as getShared.
func (s *Server) listSharedSemantic(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	viewer := UserFrom(ctx)
	sc, err := s.Store.SharedConversation(ctx, viewer.ID, r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	out := semanticTables{Tables: []semanticTable{}, Unavailable: []unavailableSource{}, ReadOnly: true}
	datasets, err := s.Store.Datasets(ctx, sc.ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	layer, err := s.Store.SemanticLayer(ctx, sc.ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	for _, d := range datasets {
		out.Tables = append(out.Tables, datasetTable(d, layer.Datasets[d.ID]))
	}
	if s.Sources != nil && len(layer.Sources) > 0 {
		list, err := s.Store.ConversationDBSources(ctx, sc.ID)
		if err != nil {
			s.error(w, r, err)
			return
		}
		for _, src := range list {
			if !src.Allows(sc.Owner) || !src.Allows(viewer.Name) {
				continue
			}
			stored := layer.Sources[src.Name]
			for _, key := range slices.Sorted(maps.Keys(stored)) {
				out.Tables = append(out.Tables, storedSourceTable(src.Name, key, stored[key]))
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// tableChange is PATCH …/dictionary/tables: which table (dataset_id, or
// source and table) and its changes, as a dictionary file gives a table's
// (an empty text removes a description, a metric with an empty sql and a
// synonym with an empty meaning are removed, relationships when given
// replace the table's).
type tableChange struct {
	DatasetID string `json:"dataset_id"`
	Source    string `json:"source"`
	Table     string `json:"table"`
	datachat.DatasetDictionary
}

// semanticSaved is the answer to a change: the table as stored, and the
// value each metric set by the change has now (a dataset's: a source's
// metrics are checked, not computed).
type semanticSaved struct {
	semanticTable
	Values map[string]any `json:"values"`
}

// problemsError answers a change that does not fit: 400 with the problems
// by field beside the message that names them all.
func (s *Server) problemsError(w http.ResponseWriter, r *http.Request, table string, problems []datachat.Problem) {
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.Message
	}
	err := s.startError(w, r, datachat.Errorf(datachat.EINVALID, "The changes to %s were not saved: %s.", table, strings.Join(msgs, "; ")))
	writeJSON(w, ErrorStatus(err), map[string]any{"error": map[string]any{
		"message": datachat.ErrorMessage(err), "type": datachat.ErrorCode(err), "problems": problems,
	}})
}

// patchSemantic is PATCH /api/conversations/{id}/dictionary/tables: one
// table's descriptions and semantic layer changed, each metric set run
// once to check it (as a query of the user's, under the SQL budget).
func (s *Server) patchSemantic(w http.ResponseWriter, r *http.Request) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	var req tableChange
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	dd := req.DatasetDictionary
	switch {
	case (req.DatasetID == "") == (req.Source == "" || req.Table == ""):
		s.error(w, r, datachat.Errorf(datachat.EINVALID, `Name the table: {"dataset_id": "…"} for a dataset, or {"source": "…", "table": "SCHEMA.TABLE"} for a database's table.`))
		return
	case dd.Description == nil && len(dd.Columns) == 0 && len(dd.Metrics) == 0 && len(dd.Synonyms) == 0 && dd.Relationships == nil:
		s.error(w, r, datachat.Errorf(datachat.EINVALID, `Send what changes: description, columns, metrics, synonyms or relationships.`))
		return
	}
	ctx := r.Context()
	user := UserFrom(ctx)
	var (
		change   datachat.Dictionary
		name     string // as the problems name the table
		sqlName  string // as its SQL writes it
		source   string
		key      string
		problems []datachat.Problem
	)
	if req.DatasetID != "" {
		datasets, err := s.Store.Datasets(ctx, conv.ID)
		if err != nil {
			s.error(w, r, err)
			return
		}
		i := slices.IndexFunc(datasets, func(d *datachat.Dataset) bool { return d.ID == req.DatasetID })
		if i < 0 {
			s.error(w, r, datachat.Errorf(datachat.ENOTFOUND, "This conversation has no dataset %q: it may have been removed; reload the page.", req.DatasetID))
			return
		}
		ds := datasets[i]
		var res datachat.DatasetDictionary
		res, problems = datachat.CheckDataset(datasets, ds, dd)
		name, sqlName = ds.Name, datachat.QuoteIdent(ds.Name)
		change = datachat.Dictionary{Datasets: map[string]datachat.DatasetDictionary{ds.Name: res}}
	} else {
		if s.Sources == nil {
			s.error(w, r, datachat.Errorf(datachat.ENOTFOUND, "This server has no database sources."))
			return
		}
		infos, err := s.Sources.Describe(ctx, user, conv.ID)
		if err != nil {
			s.error(w, r, err)
			return
		}
		i := slices.IndexFunc(infos, func(in datachat.DBSourceInfo) bool { return strings.EqualFold(in.Name, req.Source) })
		if i < 0 {
			s.error(w, r, datachat.Errorf(datachat.ENOTFOUND, "The database %q is not attached to this conversation.", req.Source))
			return
		}
		src := infos[i]
		if src.Unavailable != "" {
			s.error(w, r, datachat.Errorf(datachat.EINVALID, "The database %s cannot be read now (%s), so its tables cannot be checked: try again later.", src.Name, src.Unavailable))
			return
		}
		var res datachat.DatasetDictionary
		key, res, problems = datachat.CheckSourceTable(src, req.Table, dd)
		if key == "" {
			s.error(w, r, datachat.Errorf(datachat.ENOTFOUND, "%s.", capitalize(problems[0].Message)))
			return
		}
		t, err := datachat.FindTable(datachat.Catalog(nil, []datachat.DBSourceInfo{src}), key)
		if err != nil {
			s.error(w, r, err)
			return
		}
		source, name, sqlName = src.Name, key, t.Table.Name
		change = datachat.Dictionary{Sources: map[string]map[string]datachat.DatasetDictionary{src.Name: {key: res}}}
	}
	if len(problems) > 0 {
		s.problemsError(w, r, name, problems)
		return
	}
	values := map[string]any{}
	if set := metricsSet(dd); len(set) > 0 {
		if err := s.budgets.sql.take(conv.UserID); err != nil {
			s.error(w, r, err)
			return
		}
		run := func(q string) (*datachat.QueryResult, error) {
			if source == "" {
				return s.Workspace.Query(ctx, conv.ID, q)
			}
			return s.Sources.Query(ctx, user, conv.ID, source, q)
		}
		for _, mname := range set {
			v, ps, err := checkMetric(run, name, sqlName, mname, dd.Metrics[mname], source != "")
			if err != nil {
				s.error(w, r, err)
				return
			}
			problems = append(problems, ps...)
			if v != nil {
				values[mname] = v
			}
		}
		if len(problems) > 0 {
			s.problemsError(w, r, name, problems)
			return
		}
	}
	if err := s.Store.UpdateDictionary(ctx, conv.UserID, conv.ID, change); err != nil {
		s.error(w, r, err)
		return
	}
	out, err := s.semanticTables(ctx, conv)
	if err != nil {
		s.error(w, r, err)
		return
	}
	for _, t := range out.Tables {
		if (source == "" && t.DatasetID == req.DatasetID) || (source != "" && t.Source == source && t.Name == key) {
			writeJSON(w, http.StatusOK, semanticSaved{semanticTable: t, Values: values})
			return
		}
	}
	s.error(w, r, datachat.Errorf(datachat.ENOTFOUND, "The table %s is gone from this conversation.", name))
}

// metricsSet are the names of the metrics a change sets (not removes).
func metricsSet(dd datachat.DatasetDictionary) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(dd.Metrics)) {
		if strings.TrimSpace(dd.Metrics[name].SQL) != "" {
			out = append(out, name)
		}
	}
	return out
}

// checkMetric runs a metric as the model and the number checker will, over
// table (named in SQL as sqlName): on a dataset its statement itself, which
// must give one value; on a database's table the statement with LIMIT 0,
// which the database checks without reading the table. It returns the
// value, or the problems of its sql or filter in words; err when the query
// failed for a reason not the metric's (the database is down).
func checkMetric(run func(string) (*datachat.QueryResult, error), table, sqlName, name string, m datachat.Metric, remote bool) (any, []datachat.Problem, error) {
	field := "metrics." + name + "."
	q := m.Query(sqlName)
	if remote {
		q += " LIMIT 0"
	}
	res, err := run(q)
	if err != nil {
		if datachat.ErrorCode(err) != datachat.EINVALID {
			return nil, nil, err
		}
		// Whose fault: the condition's, if it fails alone.
		if strings.TrimSpace(m.Filter) != "" {
			if _, ferr := run("SELECT 1 AS ok FROM " + sqlName + " WHERE " + strings.TrimSpace(m.Filter) + " LIMIT 0"); ferr != nil && datachat.ErrorCode(ferr) == datachat.EINVALID {
				return nil, []datachat.Problem{{Field: field + "filter", Message: fmt.Sprintf("metric %s of %s: its filter %s does not run: %s", name, table, strings.TrimSpace(m.Filter), engineMessage(ferr))}}, nil
			}
		}
		return nil, []datachat.Problem{{Field: field + "sql", Message: fmt.Sprintf("metric %s of %s: %s does not run: %s", name, table, strings.TrimSpace(m.SQL), engineMessage(err))}}, nil
	}
	if remote {
		return nil, nil, nil
	}
	if len(res.Columns) != 1 || len(res.Rows) != 1 {
		return nil, []datachat.Problem{{Field: field + "sql", Message: fmt.Sprintf("metric %s of %s: %s gives %d rows, not one value: write an aggregate such as sum(amount) or count(*)", name, table, strings.TrimSpace(m.SQL), res.RowCount)}}, nil
	}
	return res.Rows[0][0], nil, nil
}

// engineMessage is a query's error in words, without the statement the
// engine quotes after it (the check's, not one the user wrote).
func engineMessage(err error) string {
	msg, _, _ := strings.Cut(datachat.ErrorMessage(err), "\nLINE ")
	return strings.TrimRight(strings.TrimSpace(msg), ".")
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
