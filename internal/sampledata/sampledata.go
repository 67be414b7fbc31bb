// Package sampledata makes the sample data datachat offers in an empty
// conversation, so that a new user can ask a question before finding a file
// of their own: a year of a made-up bicycle shop's sales as CSV, and a short
// Markdown guide to it that answers can cite. Both are generated from a fixed
// seed, so every datachat holds the same bytes (no file of someone else's is
// shipped), and the guide's figures are computed from the rows it describes.
package sampledata

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"
)

// The file names the sample is added under, and the table name asked for.
// The server recognises a conversation's sample by these names.
const (
	DatasetFile  = "sample-sales.csv"
	Table        = "sales"
	DocumentFile = "sample-sales-guide.md"
)

// Shop is the made-up company the sample's sales are of.
const Shop = "Kestrel Cycles"

// CSV returns the sample dataset: one row per order line of 2025, with a
// header row. The caller must not modify it.
func CSV() []byte { return generated().csv }

// Guide returns the sample document, a Markdown description of [CSV] with
// its columns, rules and figures. The caller must not modify it.
func Guide() []byte { return generated().guide }

// Rows returns how many data rows [CSV] holds.
func Rows() int { return len(generated().rows) }

type product struct {
	name, category string
	price          float64
	service        bool // one job per row: units is always 1
}

var products = []product{
	{"City bike", "Bikes", 649, false},
	{"Road bike", "Bikes", 1299, false},
	{"Kids bike", "Bikes", 249, false},
	{"Helmet", "Accessories", 59, false},
	{"Lock", "Accessories", 35, false},
	{"Lights set", "Accessories", 29, false},
	{"Bottle", "Accessories", 9, false},
	{"Rain jacket", "Clothing", 119, false},
	{"Gloves", "Clothing", 25, false},
	{"Jersey", "Clothing", 49, false},
	{"Tune-up", "Service", 79, true},
	{"Repair", "Service", 45, true},
}

// regions and their share of orders, in percent.
var regions = []struct {
	name  string
	share int
}{{"North", 22}, {"South", 31}, {"East", 20}, {"West", 27}}

// partnerFrom is the first day partner (reseller) orders were taken.
var partnerFrom = time.Date(2025, time.April, 1, 0, 0, 0, 0, time.UTC)

const partnerDiscount = 0.20

type row struct {
	id                                 int
	date                               time.Time
	region, channel, category, product string
	units                              int
	price, discount, revenue           float64
}

type data struct {
	rows       []row
	csv, guide []byte
}

var generated = sync.OnceValue(generate)

func generate() data {
	r := rand.New(rand.NewPCG(2025, 24))
	var rows []row
	start := time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)
	for day := start; day.Year() == 2025; day = day.AddDate(0, 0, 1) {
		// More orders from spring to late summer, fewer on Sundays.
		season := 1 + 0.6*math.Sin(float64(day.YearDay()-80)/365*2*math.Pi)
		n := int(math.Round(season * float64(6+r.IntN(6))))
		if day.Weekday() == time.Sunday {
			n /= 2
		}
		for range n {
			rows = append(rows, order(r, day, len(rows)+1))
		}
	}
	d := data{rows: rows}
	d.csv = writeCSV(rows)
	d.guide = writeGuide(rows)
	return d
}

func order(r *rand.Rand, day time.Time, id int) row {
	region := regions[len(regions)-1].name
	for pick, i := r.IntN(100), 0; i < len(regions); i++ {
		if pick -= regions[i].share; pick < 0 {
			region = regions[i].name
			break
		}
	}
	p := products[r.IntN(len(products))]
	// Bikes sell in spring and summer; service peaks before the season.
	if p.category == "Bikes" && (day.Month() < time.March || day.Month() > time.September) && r.IntN(2) == 0 {
		p = products[3+r.IntN(7)]
	}
	channel := []string{"Online", "Store", "Store"}[r.IntN(3)]
	if !day.Before(partnerFrom) && r.IntN(6) == 0 {
		channel = "Partner"
	}
	units := 1
	if !p.service && p.category != "Bikes" {
		units = 1 + r.IntN(4)
	}
	if channel == "Partner" && !p.service {
		units *= 1 + r.IntN(5)
	}
	var discount float64
	switch channel {
	case "Partner":
		discount = partnerDiscount
	case "Online":
		discount = []float64{0, 0, 0, 0.05, 0.10}[r.IntN(5)]
	default:
		discount = []float64{0, 0, 0, 0, 0.05}[r.IntN(5)]
	}
	return row{
		id: 10000 + id, date: day, region: region, channel: channel,
		category: p.category, product: p.name, units: units, price: p.price, discount: discount,
		revenue: math.Round(float64(units)*p.price*(1-discount)*100) / 100,
	}
}

func writeCSV(rows []row) []byte {
	var b bytes.Buffer
	b.WriteString("order_id,order_date,region,channel,category,product,units,unit_price,discount,revenue\n")
	for _, x := range rows {
		fmt.Fprintf(&b, "%d,%s,%s,%s,%s,%s,%d,%s,%s,%s\n", x.id, x.date.Format(time.DateOnly), x.region, x.channel,
			x.category, x.product, x.units, money(x.price), strconv.FormatFloat(x.discount, 'f', 2, 64), money(x.revenue))
	}
	return b.Bytes()
}

func money(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// grouped sums revenue by key, largest first.
func grouped(rows []row, key func(row) string) []struct {
	key     string
	revenue float64
} {
	sums := map[string]float64{}
	for _, x := range rows {
		sums[key(x)] += x.revenue
	}
	out := make([]struct {
		key     string
		revenue float64
	}, 0, len(sums))
	for k, v := range sums {
		out = append(out, struct {
			key     string
			revenue float64
		}{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].revenue > out[j].revenue })
	return out
}

// thousands writes a whole number with comma thousands separators.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func writeGuide(rows []row) []byte {
	var total float64
	for _, x := range rows {
		total += x.revenue
	}
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# %s sales, 2025\n\n", Shop)
	p("This guide describes the table `%s` (file `%s`), sample data that datachat generates: %s is a made-up bicycle shop, and every row is invented. ", Table, DatasetFile, Shop)
	p("The table holds %s order lines from %s to %s, with a net revenue of %s EUR in all.\n\n",
		thousands(float64(len(rows))), rows[0].date.Format("2 January 2006"), rows[len(rows)-1].date.Format("2 January 2006"), thousands(total))
	p("## Columns\n\n")
	p("- `order_id`: the order line's number, unique.\n")
	p("- `order_date`: the day the order was taken.\n")
	p("- `region`: the sales region, one of North, South, East and West.\n")
	p("- `channel`: how the order came in: Online (the web shop), Store (one of the shops) or Partner (a reseller).\n")
	p("- `category` and `product`: what was sold. The categories are Bikes, Accessories, Clothing and Service.\n")
	p("- `units`: how many were sold. A Service row is one workshop job, so its units are always 1.\n")
	p("- `unit_price`: the list price of one unit, in EUR.\n")
	p("- `discount`: the discount given, as a fraction (0.05 is 5%%).\n")
	p("- `revenue`: net revenue in EUR: units × unit_price × (1 − discount), rounded to the cent.\n\n")
	p("## Rules worth knowing\n\n")
	p("- The Partner channel opened on %s; there are no partner orders before it.\n", partnerFrom.Format("2 January 2006"))
	p("- Partner orders always carry a %d%% discount. Online orders get at most 10%%, shop orders at most 5%%.\n", int(partnerDiscount*100))
	p("- Bikes sell mostly from March to September; outside those months about half the bike orders become accessories or clothing.\n")
	p("- Revenue is net of discount and excludes VAT. The financial year is the calendar year.\n\n")
	p("## Revenue by region\n\n")
	p("| region | revenue (EUR) |\n|---|---:|\n")
	for _, g := range grouped(rows, func(x row) string { return x.region }) {
		p("| %s | %s |\n", g.key, thousands(g.revenue))
	}
	p("\n## Questions to try\n\n")
	p("- Which region had the most revenue, and how did it change by month?\n")
	p("- What share of revenue came through the Partner channel after it opened?\n")
	p("- Which products sell best in winter?\n")
	return b.Bytes()
}
