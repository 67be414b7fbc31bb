package chat

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"datachat"
	"datachat/internal/numcheck"
)

// Metrics as evidence: a metric of the data dictionary's semantic layer
// that an answer names is computed as the dictionary defines it, in the
// same sandbox as any query (a dataset's in DuckDB, a source's table's in
// the database, recorded in the audit log as every query there is), and
// its value is evidence the number checker matches the answer's numbers
// against: a number matched to it has the source {"metric": NAME}.

// Bounds of the metrics computed for one answer.
const (
	maxMetricsChecked = 5
	metricTimeout     = 10 * time.Second
)

// namedMetric is a metric and where it is computed.
type namedMetric struct {
	name   string
	metric datachat.Metric
	source string // "" for a dataset's
	table  string // as its SQL writes it
}

// metricEvidence computes the metrics the answer names (at most
// maxMetricsChecked) and returns their values as results for the number
// checker. A metric that fails to compute is logged and left out; one on a
// database is recorded in the audit log as every query there is.
func (t *turn) metricEvidence(ctx context.Context, answer string) []numcheck.Result {
	named := t.namedMetrics(answer)
	if len(named) == 0 {
		return nil
	}
	// The turn's values (its user, the request its audit records name),
	// not its end: a cancelled answer is checked too.
	ctx, cancel := context.WithTimeout(datachat.WithUserID(context.WithoutCancel(ctx), t.user.ID), metricTimeout)
	defer cancel()
	var out []numcheck.Result
	for _, m := range named {
		q := m.metric.Query(m.table)
		var (
			r   *datachat.QueryResult
			err error
		)
		if m.source == "" {
			r, err = t.r.Data.Query(ctx, t.conv.ID, q)
		} else if t.r.Sources != nil {
			r, err = t.r.Sources.Query(ctx, t.user, t.conv.ID, m.source, q)
		}
		if err != nil || r == nil || len(r.Rows) != 1 || len(r.Columns) != 1 {
			attrs := []any{slog.String("message_id", t.msg.ID), slog.String("metric", m.name)}
			if err != nil {
				attrs = append(attrs, slog.String("error", datachat.ErrorMessage(err)))
			}
			t.r.Logger.Info("a metric the answer names could not be computed for its number check", attrs...)
			continue
		}
		res := numcheck.ResultFromQuery("metric:"+m.name, r)
		res.Metric = m.name
		out = append(out, res)
	}
	return out
}

// namedMetrics are the metrics of the conversation's tables whose name (or
// a synonym meaning it) the answer holds as words.
func (t *turn) namedMetrics(answer string) []namedMetric {
	lower := strings.ToLower(answer)
	var all []namedMetric
	add := func(source, table string, metrics map[string]datachat.Metric, synonyms map[string]string) {
		for _, name := range slices.Sorted(maps.Keys(metrics)) {
			terms := []string{name, strings.ReplaceAll(name, "_", " ")}
			for term, meaning := range synonyms {
				if strings.EqualFold(strings.TrimSpace(meaning), name) {
					terms = append(terms, term)
				}
			}
			for _, term := range terms {
				if numcheck.ContainsWord(lower, strings.ToLower(term), identByte) {
					all = append(all, namedMetric{name: name, metric: metrics[name], source: source, table: table})
					break
				}
			}
		}
	}
	datasets, err := t.r.Data.Datasets(context.Background(), t.conv.ID)
	if err == nil {
		for _, d := range datasets {
			add("", datachat.QuoteIdent(d.Name), d.Metrics, d.Synonyms)
		}
	}
	for _, s := range t.sources {
		for _, tb := range s.Tables {
			add(s.Name, tb.Name, tb.Metrics, tb.Synonyms)
		}
	}
	if len(all) > maxMetricsChecked {
		all = all[:maxMetricsChecked]
	}
	return all
}
