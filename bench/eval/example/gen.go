//go:build ignore

// gen writes orders.csv, the data of the example eval suite: 500 orders of
// a made-up shop over 2023 and 2024, every value a function of the order's
// number, so the file is the same on every run.
//
//	go run gen.go   (in bench/eval/example)
package main

import (
	"encoding/csv"
	"fmt"
	"log"
	"os"
	"time"
)

func main() {
	f, err := os.Create("orders.csv")
	if err != nil {
		log.Fatal(err)
	}
	w := csv.NewWriter(f)
	w.Write([]string{"order_id", "order_date", "customer", "region", "product", "quantity", "unit_price", "refunded"})
	regions := []string{"North", "South", "East", "West"}
	products := []string{"Widget", "Gadget", "Gizmo", "Doohickey"}
	prices := []string{"12.50", "30.00", "7.25", "55.00"}
	start := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= 500; i++ {
		h := uint32(i) * 2654435761 // Knuth's multiplicative hash: scrambled, but fixed
		p := (h >> 13) % 4
		w.Write([]string{
			fmt.Sprint(i),
			start.AddDate(0, 0, i*37%730).Format("2006-01-02"),
			fmt.Sprintf("C%02d", (h>>3)%60+1),
			regions[(h>>7)%4],
			products[p],
			fmt.Sprint(1 + (h>>19)%9),
			prices[p],
			fmt.Sprint(i%17 == 0),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
