package xlsx

import (
	"datachat"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"datachat/internal/sharedtest"
)

// The workbooks in ../shared/data/xlsx, described in its README: every one
// loads with the tables, types and row counts asserted here, or is refused
// with a clear message.

// openShared opens a workbook of ../shared/data/xlsx.
func openShared(t *testing.T, file string) *Workbook {
	t.Helper()
	return open(t, sharedtest.Path(t, "data/xlsx/"+file), Limits{})
}

// tables spells a workbook's tables as "table (rows rows)" with the table
// name datachat gives a sheet of that file.
func tables(file string, wb *Workbook) []string {
	var out, taken []string
	for _, s := range wb.Sheets {
		name := datachat.TableName(strings.TrimSuffix(file, ".xlsx")+"_"+s.Name, taken)
		taken = append(taken, name)
		out = append(out, name+" ("+strconv.FormatInt(s.Rows, 10)+" rows)")
	}
	return out
}

func wantTables(t *testing.T, file string, wb *Workbook, want []string) {
	t.Helper()
	if got := tables(file, wb); !reflect.DeepEqual(got, want) {
		t.Errorf("got tables\n%q\nwant\n%q", got, want)
	}
}

func wantColumns(t *testing.T, s *Sheet, want []string) {
	t.Helper()
	if got := columns(s); !reflect.DeepEqual(got, want) {
		t.Errorf("sheet %q: got columns\n%q\nwant\n%q", s.Name, got, want)
	}
}

// wantRows checks a sheet's rows, spelled as [rows] spells them.
func wantRows(t *testing.T, s *Sheet, want [][]string) {
	t.Helper()
	if got := rows(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("got rows %q, want %q", got, want)
	}
}

func wantRow(t *testing.T, s *Sheet, i int, want []string) {
	t.Helper()
	all := rows(t, s)
	if i >= len(all) {
		t.Fatalf("sheet %q has %d rows, want row %d", s.Name, len(all), i)
	}
	if got := all[i]; !reflect.DeepEqual(got, want) {
		t.Errorf("sheet %q row %d: got %q, want %q", s.Name, i, got, want)
	}
}

func wantNote(t *testing.T, s *Sheet, text string) {
	t.Helper()
	if notes := strings.Join(s.Notes, "; "); !strings.Contains(notes, text) {
		t.Errorf("sheet %q: notes %q do not say %q", s.Name, notes, text)
	}
}

func TestSharedDatasets(t *testing.T) {
	wb := openShared(t, "datasets.xlsx")
	wantTables(t, "datasets.xlsx", wb, []string{"datasets_mtcars (32 rows)", "datasets_chickwts (71 rows)", "datasets_quakes (1000 rows)"})
	mt := sheetNamed(t, wb, "mtcars")
	wantColumns(t, mt, []string{"mpg:DOUBLE", "cyl:BIGINT", "disp:DOUBLE", "hp:BIGINT", "drat:DOUBLE", "wt:DOUBLE", "qsec:DOUBLE", "vs:BIGINT", "am:BIGINT", "gear:BIGINT", "carb:BIGINT"})
	wantRow(t, mt, 0, []string{"21", "6", "160", "110", "3.9", "2.62", "16.46", "0", "1", "4", "4"})
	wantColumns(t, sheetNamed(t, wb, "chickwts"), []string{"weight:BIGINT", "feed:VARCHAR"})
	q := sheetNamed(t, wb, "quakes")
	wantColumns(t, q, []string{"lat:DOUBLE", "long:DOUBLE", "depth:BIGINT", "mag:DOUBLE", "stations:BIGINT"})
	wantRow(t, q, 999, []string{"-21.59", "170.56", "165", "6", "119"})
	for _, s := range wb.Sheets {
		if len(s.Notes) != 0 {
			t.Errorf("sheet %q: notes %q on a clean sheet", s.Name, s.Notes)
		}
	}
}

func TestSharedDeaths(t *testing.T) {
	wb := openShared(t, "deaths.xlsx")
	wantTables(t, "deaths.xlsx", wb, []string{"deaths_arts (10 rows)", "deaths_other (10 rows)"})
	cols := []string{"Name:VARCHAR", "Profession:VARCHAR", "Age:BIGINT", "Has kids:BOOLEAN", "Date of birth:DATE", "Date of death:DATE"}
	arts := sheetNamed(t, wb, "arts")
	wantColumns(t, arts, cols)
	wantRow(t, arts, 0, []string{"David Bowie", "musician", "69", "true", "1947-01-08", "2016-01-10"})
	wantRow(t, arts, 8, []string{"Zsa Zsa Gábor", "actor", "99", "true", "1917-02-06", "2016-12-18"})
	other := sheetNamed(t, wb, "other")
	wantColumns(t, other, cols)
	wantRow(t, other, 3, []string{"Fidel Castro", "politician", "90", "true", "1926-08-13", "2016-11-25"})
	for _, s := range wb.Sheets {
		wantNote(t, s, "rows 1–4 above the header skipped")
		wantNote(t, s, "rows 16–19 below the table skipped")
	}
}

func TestSharedNewResConst(t *testing.T) {
	wb := openShared(t, "newresconst.xlsx")
	wantTables(t, "newresconst.xlsx", wb, []string{
		"newresconst_table_1_permits (40 rows)", "newresconst_table_2_auth_not_started (40 rows)",
		"newresconst_table_3_starts (40 rows)", "newresconst_table_4_under_construction (40 rows)",
		"newresconst_table_5_completions (40 rows)",
	})
	p := sheetNamed(t, wb, "Table 1 - Permits")
	wantColumns(t, p, []string{"section:VARCHAR", "Period:VARCHAR",
		"United States Total:DOUBLE", "United States 1 unit:DOUBLE", "United States 2 to 4 units:DOUBLE", "United States 5 units or more:DOUBLE",
		"Northeast Total:DOUBLE", "Northeast 1 unit:DOUBLE", "Midwest Total:DOUBLE", "Midwest 1 unit:DOUBLE",
		"South Total:DOUBLE", "South 1 unit:DOUBLE", "West Total:DOUBLE", "West 1 unit:DOUBLE"})
	wantRow(t, p, 0, []string{"2018", "March . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . .", "1377", "851", "40", "486", "135", "51", "203", "119", "652", "456", "387", "225"})
	// The percent change is stored as a fraction, shown as -1.7%.
	wantRow(t, p, 14, []string{"Percent Change2", "Mar. 2019 from Feb. 2019 . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . .", "-0.017", "-0.011", "-0.027", "-0.027", "-0.096", "-0.145", "-0.036", "-0.038", "-0.046", "0.009", "0.1", "0"})
	wantNote(t, p, "rows 1–4 above the header skipped")
	wantNote(t, p, "rows 65–76 below the table skipped")
	wantNote(t, p, "2 rows repeating the header dropped")
	wantNote(t, p, `6 section labels`)
	// "S" (suppressed) among the numbers keeps a column text.
	if got := columns(sheetNamed(t, wb, "Table 2 - Auth Not Started"))[4]; got != "United States 2 to 4 units:VARCHAR" {
		t.Errorf("got %q, want the column with S values as VARCHAR", got)
	}
}

func TestSharedEnron(t *testing.T) {
	wb := openShared(t, "enron-nested.xlsx")
	wantTables(t, "enron-nested.xlsx", wb, []string{
		"enron_nested_preschedule (167 rows)", "enron_nested_deals (92 rows)", "enron_nested_fuel (17 rows)",
		"enron_nested_comp (5 rows)", "enron_nested_economics (43 rows)", "enron_nested_spin_reserve_log_sheet (26 rows)",
		"enron_nested_balancing (27 rows)", "enron_nested_unit_summary (19 rows)", "enron_nested_heatrate (215 rows)",
		"enron_nested_top (1 rows)", "enron_nested_epedata (59 rows)",
	})
	skipped := strings.Join(wb.Skipped, "; ")
	for _, text := range []string{`"Code" is very hidden`, `"Module1" is very hidden`, `"dlgAddRows" is a dialog sheet`} {
		if !strings.Contains(skipped, text) {
			t.Errorf("Skipped %q does not say %q", skipped, text)
		}
	}
	// Every cached error on Preschedule is NULL (the README counts 1,019).
	wantNote(t, sheetNamed(t, wb, "Preschedule"), "1019 cells held an Excel error (#NAME?, #REF!, #N/A): NULL")
	hr := sheetNamed(t, wb, "HeatRate")
	if got := columns(hr); len(got) != 13 || got[0] != "MWh's:BIGINT" || got[1] != "Steam Unit 1:DOUBLE" {
		t.Errorf("HeatRate: got columns %q", got)
	}
	wantRow(t, hr, 0, []string{"1", "54.56299", "57.405300000000004", "108.46300000000001", "157.396757", "157.396757", "251.97104549999997", "251.97104549999997", "472.89110364999993", "273.7965496", "84.46554699999999", "101.264546", "101.6345"})
	log := sheetNamed(t, wb, "spin reserve log sheet")
	wantColumns(t, log, []string{"Date:DATE", "Actual 4 minute increment that you checked:VARCHAR", "Name of person you spoke to:VARCHAR", "Comments ( include what spin was when you checked it):VARCHAR"})
	wantRow(t, log, 0, []string{"2000-03-07", "El Paso defiecent for He 7 due to loss of Artesia", "Frank", "Per Tony Soto imports are limited to a total of 335 Mw. Per this direction I"})
}

func TestSharedGapminder(t *testing.T) {
	wb := openShared(t, "gapminder_life_expectancy_at_birth.xlsx")
	wantTables(t, "gapminder_life_expectancy_at_birth.xlsx", wb, []string{
		"gapminder_life_expectancy_at_birth_data (260 rows)", "gapminder_life_expectancy_at_birth_about (30 rows)",
		"gapminder_life_expectancy_at_birth_footnotes (1 rows)", "gapminder_life_expectancy_at_birth_settings (2 rows)",
		"gapminder_life_expectancy_at_birth_download (4 rows)", "gapminder_life_expectancy_at_birth_v (0 rows)",
	})
	d := sheetNamed(t, wb, "Data")
	if len(d.Columns) != 218 || d.Columns[0] != (Column{Name: "Life expectancy", Type: TypeVarchar}) {
		t.Fatalf("Data: got %d columns, the first %+v", len(d.Columns), d.Columns[0])
	}
	for i, c := range d.Columns[1:] {
		if want := strconv.Itoa(1800 + i); c.Name != want || c.Type != TypeDouble {
			t.Fatalf("Data column %d: got %s %s, want %s DOUBLE", i+1, c.Name, c.Type, want)
		}
	}
	// 43,857 values, and 50 countries without any.
	values, empty, n := 0, 0, 0
	err := d.Each(func(row []any) error {
		n++
		got := 0
		for _, v := range row[1:] {
			if v != nil {
				got++
			}
		}
		values += got
		if got == 0 {
			empty++
		}
		if row[0] == "Afghanistan" && row[1] != 28.21 {
			t.Errorf("Afghanistan 1800: got %v, want 28.21", row[1])
		}
		return nil
	})
	if err != nil || n != 260 || values != 43857 || empty != 50 {
		t.Errorf("Data: got %d rows, %d values, %d without values (%v); want 260, 43857, 50", n, values, empty, err)
	}
}

func TestSharedPeru(t *testing.T) {
	wb := openShared(t, "EvaluacionCensal_Secundaria_SEGUNDO_14112018_160622.xlsx")
	// Every row of results carries its year, 2016: 741 and 248 of them.
	wantTables(t, "EvaluacionCensal_Secundaria_SEGUNDO_14112018_160622.xlsx", wb, []string{
		"evaluacioncensal_secundaria_segundo_14112018_160622_nacional (741 rows)",
		"evaluacioncensal_secundaria_segundo_14112018_160622_cobertur (248 rows)", // TableName cuts at 60 characters
	})
	n := sheetNamed(t, wb, "NACIONAL")
	wantColumns(t, n, []string{"section:VARCHAR", "Año:BIGINT", "Resultados:VARCHAR", "Resultados_2:VARCHAR", "Medida promedio:BIGINT",
		"Nivel de logro Previo al inicio:DOUBLE", "Nivel de logro En inicio:DOUBLE", "Nivel de logro En proceso:DOUBLE", "Nivel de logro Satisfactorio:DOUBLE"})
	for _, c := range n.Columns[5:] {
		if !c.Percent {
			t.Errorf("NACIONAL %q: got Percent false for text such as 20.5 %%", c.Name)
		}
	}
	wantRow(t, n, 0, []string{"Lectura", "2016", "NACIONAL", "", "567", "0.205", "0.377", "0.275", "0.143"})
	wantRow(t, n, 2, []string{"Lectura", "2016", "UGEL", "Bagua", "552", "0.253", "0.443", "0.199", "0.105"})
	wantNote(t, n, "rows 3–7 above the header skipped")
	wantNote(t, n, "82 rows repeating the header dropped")
	sections := map[string]int{}
	n.Each(func(row []any) error { sections[row[0].(string)]++; return nil })
	if len(sections) != 3 || sections["Lectura"] == 0 || sections["Historía-Geografía y Economía"] == 0 {
		t.Errorf("NACIONAL sections: got %v, want the three subjects", sections)
	}
	c := sheetNamed(t, wb, "Cobertura")
	wantColumns(t, c, []string{"Año:BIGINT", "Resultados:VARCHAR", "Resultados_2:VARCHAR",
		"Cobertura de IIEE Nº Total que se esperaba evaluar:BIGINT", "Cobertura de IIEE Nº total evaluado:BIGINT", "Cobertura de IIEE Cobertura %:DOUBLE",
		"Cobertura de Estudiantes Nº Total que se esperaba evaluar:BIGINT", "Cobertura de Estudiantes Nº total evaluado:BIGINT", "Cobertura de Estudiantes Cobertura %:DOUBLE"})
	wantRow(t, c, 0, []string{"2016", "NACIONAL", "", "12895", "12878", "0.999", "1950396", "1878923", "0.963"})
	wantNote(t, c, "rows 287–289 below the table skipped")
}

func TestSharedPivots(t *testing.T) {
	wb := openShared(t, "pivots.xlsx")
	wantTables(t, "pivots.xlsx", wb, []string{
		"pivots_pivotsheet1 (2 rows)", "pivots_pivotsheet2 (7 rows)", "pivots_pivotsheet3 (4 rows)",
		"pivots_pivotsheet4 (6 rows)", "pivots_datasheet (10 rows)", "pivots_datasheet2 (10 rows)",
	})
	d := sheetNamed(t, wb, "DataSheet")
	wantColumns(t, d, []string{"Id:BIGINT", "Name:VARCHAR", "Category:VARCHAR", "Value:BIGINT", "Size:DOUBLE", "Date:DATE",
		"Value / Size:DOUBLE", "IsBlue:BOOLEAN", "Null:VARCHAR", "Misc:VARCHAR"})
	all := rows(t, d)
	misc := make([]string, len(all))
	for i, r := range all {
		misc[i] = r[9]
	}
	// Mixed values read as the sheet shows them; #DIV/0! (cached, and from
	// =1/0) is NULL.
	if want := []string{"", "2.012", "2024-02-01", "", "3.102", "20", "TRUE", "5", "10", "blue"}; !reflect.DeepEqual(misc, want) {
		t.Errorf("Misc: got %q, want %q", misc, want)
	}
	wantRow(t, d, 6, []string{"7", "g", "yellow", "10", "0", "2024-01-11", "", "false", "", "TRUE"})
	p3 := sheetNamed(t, wb, "PivotSheet3")
	wantColumns(t, p3, []string{"Row Labels:VARCHAR", "Count of Value2:BIGINT", "<-------- grouped field as value:VARCHAR"})
}

func TestSharedLeapYear1900(t *testing.T) {
	wb := openShared(t, "dates-leap-year-1900-xlsx.xlsx")
	wantTables(t, "dates-leap-year-1900-xlsx.xlsx", wb, []string{"dates_leap_year_1900_xlsx_for_testing (7 rows)", "dates_leap_year_1900_xlsx_for_human_eyes (10 rows)"})
	for _, s := range wb.Sheets {
		wantColumns(t, s, []string{"dttm:TIMESTAMP", "dttm_string:VARCHAR", "expect_success:BOOLEAN"})
		wantNote(t, s, "1 cell held a date that does not exist")
		// Column B is Excel's own TEXT(A, "yyyy-mm-dd hh:mm:ss"): every
		// date reads as Excel shows it, and 1900-02-29 is NULL.
		err := s.Each(func(row []any) error {
			shown := row[1].(string)
			if shown == "1900-02-29 08:00:00" {
				if row[0] != nil {
					t.Errorf("%s: got %v for 1900-02-29, want NULL", s.Name, row[0])
				}
				return nil
			}
			got, ok := row[0].(time.Time)
			if !ok || got.Format("2006-01-02 15:04:05") != shown {
				t.Errorf("%s: got %v, Excel shows %s", s.Name, row[0], shown)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestSharedEncrypted(t *testing.T) {
	_, err := Open(sharedtest.Path(t, "data/xlsx/encryptSHA1.xlsx"), "encryptSHA1.xlsx", Limits{TempDir: t.TempDir()})
	wantError(t, err, ErrEncrypted, "encryptSHA1.xlsx is password-protected: remove the password in Excel")
}
