package sampledata

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCSVShape(t *testing.T) {
	recs, err := csv.NewReader(bytes.NewReader(CSV())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(recs[0], ","), "order_id,order_date,region,channel,category,product,units,unit_price,discount,revenue"; got != want {
		t.Errorf("header %q, want %q", got, want)
	}
	rows := recs[1:]
	if len(rows) != Rows() || len(rows) < 2000 || len(rows) > 5000 {
		t.Fatalf("%d rows (Rows says %d), want a few thousand", len(rows), Rows())
	}
	ids := map[string]bool{}
	var total float64
	for _, r := range rows {
		if ids[r[0]] {
			t.Errorf("order_id %s twice", r[0])
		}
		ids[r[0]] = true
		day, err := time.Parse(time.DateOnly, r[1])
		if err != nil || day.Year() != 2025 {
			t.Errorf("order_date %q is not a day of 2025", r[1])
		}
		if r[3] == "Partner" && day.Before(partnerFrom) {
			t.Errorf("partner order %s on %s, before the channel opened", r[0], r[1])
		}
		units, _ := strconv.Atoi(r[6])
		price, _ := strconv.ParseFloat(r[7], 64)
		disc, _ := strconv.ParseFloat(r[8], 64)
		rev, _ := strconv.ParseFloat(r[9], 64)
		if r[3] == "Partner" && disc != partnerDiscount {
			t.Errorf("partner order %s has discount %v", r[0], disc)
		}
		if r[4] == "Service" && units != 1 {
			t.Errorf("service order %s has %d units", r[0], units)
		}
		if want := float64(units) * price * (1 - disc); rev < want-0.006 || rev > want+0.006 {
			t.Errorf("order %s: revenue %v, want units × price × (1 − discount) = %.2f", r[0], rev, want)
		}
		total += rev
	}
	// The guide's total is the table's.
	if want := "net revenue of " + thousands(total) + " EUR"; !bytes.Contains(Guide(), []byte(want)) {
		t.Errorf("the guide does not say %q:\n%s", want, Guide())
	}
	if want := thousands(float64(len(rows))) + " order lines"; !bytes.Contains(Guide(), []byte(want)) {
		t.Errorf("the guide does not say %q", want)
	}
}

// The sample is the same on every machine and every run: a change to the
// generator (or to math/rand/v2's PCG) shows here, and must be deliberate,
// since the browser test's scripted answer quotes its figures.
func TestDeterministic(t *testing.T) {
	a, b := generate(), generate()
	if !bytes.Equal(a.csv, b.csv) || !bytes.Equal(a.guide, b.guide) {
		t.Fatal("two generations differ")
	}
	if got, want := fmt.Sprintf("%x", sha256.Sum256(a.csv)), goldenCSV; got != want {
		t.Errorf("the CSV's SHA-256 is %s, want %s: the generator changed; update goldenCSV and the figures web/e2e/llmfake-script.json quotes", got, want)
	}
}

const goldenCSV = "1f97140da0c9c51681c8e7510f1fa5cb38a70ec277c8037e98009da70e9d93e4"

// TestScriptedAnswerQuotesTheSample: the browser test's scripted answer about
// the sample (web/e2e/llmfake-script.json) quotes figures of the guide's
// revenue-by-region table, so its number checks, and the README's
// screenshot, show them matched.
func TestScriptedAnswerQuotesTheSample(t *testing.T) {
	b, err := os.ReadFile("../../web/e2e/llmfake-script.json")
	if err != nil {
		t.Fatal(err)
	}
	var script struct {
		Turns []struct {
			Match struct {
				Contains string `json:"contains"`
			} `json:"match"`
			Text []string `json:"text"`
		} `json:"turns"`
	}
	if err := json.Unmarshal(b, &script); err != nil {
		t.Fatal(err)
	}
	var text string
	for _, turn := range script.Turns {
		if turn.Match.Contains == "region | revenue" {
			text = strings.Join(turn.Text, "")
		}
	}
	figures := regexp.MustCompile(`\d{1,3}(?:,\d{3})+`).FindAllString(text, -1)
	if len(figures) < 3 {
		t.Fatalf("the scripted answer about the sample quotes %d figures (%q), want the regions' revenue", len(figures), text)
	}
	for _, f := range figures {
		if !regexp.MustCompile(`\| [A-Z][a-z]+ \| ` + f + ` \|`).Match(Guide()) {
			t.Errorf("the scripted answer quotes %s, which is no region's revenue in the guide:\n%s", f, Guide())
		}
	}
}
