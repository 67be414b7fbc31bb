// Package wide builds a company's database of 500 tables in PostgreSQL, for
// measuring how the chat finds the tables a question needs when they do not
// all fit its prompt (bench/schema, and the eval suite beside it): 62 tables
// of twelve departments' schemas (sales, billing, crm, hr, …) with rows,
// realistic columns and foreign keys between them, and, as real warehouses
// have, the empty copies that pile up beside each (its _archive, _history,
// stg_…, _snapshot_2023, _backup, tmp_…_import and _audit_log tables), plus
// four tables of the application's own. Every value is computed from the row
// number, so the database is the same on every run.
package wide

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// column is a column and the SQL expression of its value in row g.
type column struct {
	name, typ, expr string
}

// fk is a foreign key: col references ref's id (ref is SCHEMA.TABLE).
type fk struct {
	col, ref string
}

// table is one of the departments' tables, with rows.
type table struct {
	schema, name string
	rows         int
	cols         []column
	fks          []fk
}

func (t table) qualified() string { return t.schema + "." + t.name }

// pick is the SQL of a value of list chosen by row g.
func pick(step int, list ...string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return fmt.Sprintf("(ARRAY[%s])[1 + (g * %d) %% %d]", strings.Join(q, ", "), step, len(list))
}

// ref is the SQL of a key of a table of n rows chosen by row g.
func ref(step, n int) string { return fmt.Sprintf("1 + (g * %d) %% %d", step, n) }

// day is a date within two years from 2023-01-01 chosen by row g.
func day(step int) string { return fmt.Sprintf("DATE '2023-01-01' + (g * %d) %% 730", step) }

// money is an amount with cents chosen by row g, between lo and lo+span.
func money(step, lo, span int) string {
	return fmt.Sprintf("round((%d + (g * %d) %% %d * 1.0 + (g %% 100) / 100.0)::numeric, 2)", lo, step, span)
}

const id = "g"

// Row counts of the tables others reference.
const (
	nCustomers  = 240
	nProducts   = 120
	nCategories = 8
	nOrders     = 900
	nInvoices   = 800
	nPlans      = 4
	nMethods    = 5
	nPayments   = 700
	nWarehouses = 6
	nSuppliers  = 30
	nCarriers   = 5
	nShipments  = 600
	nEmployees  = 150
	nDepts      = 7
	nAgents     = 20
	nTickets    = 500
	nCampaigns  = 24
	nContacts   = 300
	nServers    = 40
)

// tables are the 62 tables with rows.
var tables = []table{
	// crm
	{"crm", "customers", nCustomers, []column{{"id", "int", id}, {"full_name", "text", "'Customer ' || g"},
		{"email", "text", "'customer' || g || '@example.com'"}, {"segment", "text", pick(1, "smb", "enterprise", "consumer")},
		{"country", "text", pick(7, "DE", "FR", "US", "GB", "ES", "IT")}, {"signup_date", "date", day(3)}}, nil},
	{"crm", "contacts", nContacts, []column{{"id", "int", id}, {"customer_id", "int", ref(7, nCustomers)}, {"contact_name", "text", "'Contact ' || g"},
		{"job_role", "text", pick(3, "buyer", "cfo", "engineer", "assistant")}}, []fk{{"customer_id", "crm.customers"}}},
	{"crm", "leads", 400, []column{{"id", "int", id}, {"lead_source", "text", pick(1, "web", "referral", "event", "partner")},
		{"status", "text", pick(3, "new", "qualified", "lost", "converted")}, {"created_on", "date", day(5)}}, nil},
	{"crm", "opportunities", 260, []column{{"id", "int", id}, {"customer_id", "int", ref(11, nCustomers)},
		{"stage", "text", pick(1, "prospecting", "proposal", "won", "lost")}, {"amount", "numeric(12,2)", money(37, 500, 50000)},
		{"close_date", "date", day(9)}}, []fk{{"customer_id", "crm.customers"}}},
	{"crm", "activities", 600, []column{{"id", "int", id}, {"contact_id", "int", ref(13, nContacts)},
		{"activity_kind", "text", pick(1, "call", "email", "meeting")}, {"happened_at", "timestamp", "TIMESTAMP '2023-01-01' + (g * 7) % 700 * INTERVAL '1 day'"}},
		[]fk{{"contact_id", "crm.contacts"}}},
	// sales
	{"sales", "orders", nOrders, []column{{"id", "int", id}, {"customer_id", "int", ref(13, nCustomers)}, {"order_date", "date", day(1)},
		{"status", "text", pick(1, "placed", "shipped", "delivered", "cancelled")}, {"channel", "text", pick(5, "web", "store", "phone")}},
		[]fk{{"customer_id", "crm.customers"}}},
	{"sales", "order_items", 2400, []column{{"id", "int", id}, {"order_id", "int", ref(7, nOrders)}, {"product_id", "int", ref(11, nProducts)},
		{"quantity", "int", "1 + g % 9"}, {"unit_price", "numeric(10,2)", money(13, 5, 400)}},
		[]fk{{"order_id", "sales.orders"}, {"product_id", "product.products"}}},
	{"sales", "quotes", 300, []column{{"id", "int", id}, {"customer_id", "int", ref(17, nCustomers)}, {"quote_amount", "numeric(12,2)", money(41, 100, 20000)},
		{"valid_until", "date", day(11)}}, []fk{{"customer_id", "crm.customers"}}},
	{"sales", "discount_codes", 40, []column{{"id", "int", id}, {"code", "text", "'SAVE' || g"}, {"percent_off", "int", "5 + g % 30"}}, nil},
	{"sales", "sales_reps", 25, []column{{"id", "int", id}, {"rep_name", "text", "'Rep ' || g"}, {"region", "text", pick(1, "north", "south", "east", "west")}}, nil},
	{"sales", "territories", 12, []column{{"id", "int", id}, {"territory_name", "text", "'Territory ' || g"}, {"region", "text", pick(1, "north", "south", "east", "west")}}, nil},
	// billing
	{"billing", "invoices", nInvoices, []column{{"id", "int", id}, {"customer_id", "int", ref(19, nCustomers)}, {"order_id", "int", ref(3, nOrders)},
		{"issued_on", "date", day(1)}, {"due_on", "date", day(1) + " + 30"}, {"total_due", "numeric(12,2)", money(29, 50, 5000)},
		{"status", "text", pick(1, "paid", "open", "overdue", "paid", "void")}}, []fk{{"customer_id", "crm.customers"}, {"order_id", "sales.orders"}}},
	{"billing", "invoice_lines", 2000, []column{{"id", "int", id}, {"invoice_id", "int", ref(7, nInvoices)}, {"line_description", "text", pick(1, "licence", "support", "hardware", "training")},
		{"line_amount", "numeric(12,2)", money(17, 10, 2000)}}, []fk{{"invoice_id", "billing.invoices"}}},
	{"billing", "payments", nPayments, []column{{"id", "int", id}, {"invoice_id", "int", ref(9, nInvoices)}, {"paid_on", "date", day(2)},
		{"amount_paid", "numeric(12,2)", money(23, 50, 5000)}, {"method_id", "int", ref(1, nMethods)}},
		[]fk{{"invoice_id", "billing.invoices"}, {"method_id", "billing.payment_methods"}}},
	{"billing", "payment_methods", nMethods, []column{{"id", "int", id}, {"method_name", "text", pick(1, "card", "bank transfer", "paypal", "direct debit", "cheque")}}, nil},
	{"billing", "refunds", 120, []column{{"id", "int", id}, {"payment_id", "int", ref(13, nPayments)}, {"refund_amount", "numeric(12,2)", money(11, 5, 800)},
		{"reason", "text", pick(1, "damaged", "late", "duplicate charge", "unwanted")}}, []fk{{"payment_id", "billing.payments"}}},
	{"billing", "subscriptions", 350, []column{{"id", "int", id}, {"customer_id", "int", ref(7, nCustomers)}, {"plan_id", "int", ref(1, nPlans)},
		{"started_on", "date", day(4)}, {"monthly_fee", "numeric(10,2)", pick(1, "19", "49", "99", "249") + "::numeric"}, {"is_active", "boolean", "g % 5 <> 0"}},
		[]fk{{"customer_id", "crm.customers"}, {"plan_id", "billing.plans"}}},
	{"billing", "plans", nPlans, []column{{"id", "int", id}, {"plan_name", "text", pick(1, "starter", "team", "business", "enterprise")},
		{"monthly_price", "numeric(10,2)", pick(1, "19", "49", "99", "249") + "::numeric"}}, nil},
	// product
	{"product", "products", nProducts, []column{{"id", "int", id}, {"sku", "text", "'SKU-' || lpad(g::text, 5, '0')"}, {"product_name", "text", "'Product ' || g"},
		{"category_id", "int", ref(1, nCategories)}, {"list_price", "numeric(10,2)", money(31, 5, 600)}}, []fk{{"category_id", "product.categories"}}},
	{"product", "categories", nCategories, []column{{"id", "int", id}, {"category_name", "text", pick(1, "laptops", "phones", "audio", "cameras", "tablets", "wearables", "printers", "monitors")}}, nil},
	{"product", "product_reviews", 700, []column{{"id", "int", id}, {"product_id", "int", ref(7, nProducts)}, {"rating", "int", "1 + (g * 3) % 5"},
		{"reviewed_on", "date", day(5)}}, []fk{{"product_id", "product.products"}}},
	{"product", "price_changes", 200, []column{{"id", "int", id}, {"product_id", "int", ref(3, nProducts)}, {"old_price", "numeric(10,2)", money(31, 5, 600)},
		{"new_price", "numeric(10,2)", money(29, 5, 600)}, {"changed_on", "date", day(7)}}, []fk{{"product_id", "product.products"}}},
	// inventory
	{"inventory", "warehouses", nWarehouses, []column{{"id", "int", id}, {"warehouse_name", "text", "'Warehouse ' || g"},
		{"city", "text", pick(1, "Hamburg", "Lyon", "Leeds", "Porto", "Milan", "Boston")}}, nil},
	{"inventory", "stock_levels", 480, []column{{"id", "int", id}, {"warehouse_id", "int", ref(1, nWarehouses)}, {"product_id", "int", ref(1, nProducts)},
		{"quantity_on_hand", "int", "(g * 37) % 500"}}, []fk{{"warehouse_id", "inventory.warehouses"}, {"product_id", "product.products"}}},
	{"inventory", "stock_movements", 1500, []column{{"id", "int", id}, {"warehouse_id", "int", ref(5, nWarehouses)}, {"product_id", "int", ref(7, nProducts)},
		{"quantity", "int", "(g * 13) % 60 - 30"}, {"moved_on", "date", day(1)}, {"movement_reason", "text", pick(1, "receipt", "sale", "adjustment", "transfer")}},
		[]fk{{"warehouse_id", "inventory.warehouses"}, {"product_id", "product.products"}}},
	{"inventory", "suppliers", nSuppliers, []column{{"id", "int", id}, {"supplier_name", "text", "'Supplier ' || g"}, {"country", "text", pick(1, "CN", "DE", "US", "VN", "MX")}}, nil},
	{"inventory", "purchase_orders", 250, []column{{"id", "int", id}, {"supplier_id", "int", ref(7, nSuppliers)}, {"ordered_on", "date", day(3)},
		{"total_cost", "numeric(12,2)", money(43, 1000, 90000)}}, []fk{{"supplier_id", "inventory.suppliers"}}},
	// shipping
	{"shipping", "shipments", nShipments, []column{{"id", "int", id}, {"order_id", "int", ref(1, nOrders)}, {"carrier_id", "int", ref(1, nCarriers)},
		{"shipped_on", "date", day(1)}, {"delivered_on", "date", day(1) + " + (g % 9)"}, {"shipment_status", "text", pick(1, "delivered", "in transit", "lost")}},
		[]fk{{"order_id", "sales.orders"}, {"carrier_id", "shipping.carriers"}}},
	{"shipping", "carriers", nCarriers, []column{{"id", "int", id}, {"carrier_name", "text", pick(1, "DHL", "UPS", "FedEx", "DPD", "GLS")}}, nil},
	{"shipping", "delivery_exceptions", 150, []column{{"id", "int", id}, {"shipment_id", "int", ref(11, nShipments)},
		{"exception_kind", "text", pick(1, "address not found", "damaged", "customs hold", "weather delay")}, {"reported_on", "date", day(3)}},
		[]fk{{"shipment_id", "shipping.shipments"}}},
	{"shipping", "return_requests", 180, []column{{"id", "int", id}, {"order_id", "int", ref(5, nOrders)}, {"requested_on", "date", day(2)},
		{"return_reason", "text", pick(1, "wrong size", "defective", "changed mind", "defective", "arrived late")}}, []fk{{"order_id", "sales.orders"}}},
	// hr
	{"hr", "employees", nEmployees, []column{{"id", "int", id}, {"full_name", "text", "'Employee ' || g"}, {"department_id", "int", ref(1, nDepts)},
		{"hired_on", "date", "DATE '2015-01-01' + (g * 41) % 3000"}, {"salary", "numeric(10,2)", money(97, 35000, 90000)}, {"manager_id", "int", "CASE WHEN g > 10 THEN 1 + g % 10 END"}},
		[]fk{{"department_id", "hr.departments"}, {"manager_id", "hr.employees"}}},
	{"hr", "departments", nDepts, []column{{"id", "int", id}, {"department_name", "text", pick(1, "Engineering", "Sales", "Support", "Finance", "Marketing", "Operations", "People")},
		{"cost_center", "text", "'CC' || (100 + g)"}}, nil},
	{"hr", "time_off_requests", 400, []column{{"id", "int", id}, {"employee_id", "int", ref(7, nEmployees)}, {"starts_on", "date", day(2)},
		{"days", "int", "1 + g % 10"}, {"request_status", "text", pick(1, "approved", "pending", "rejected", "approved")}}, []fk{{"employee_id", "hr.employees"}}},
	{"hr", "performance_reviews", 300, []column{{"id", "int", id}, {"employee_id", "int", ref(3, nEmployees)}, {"score", "int", "1 + (g * 7) % 5"},
		{"review_year", "int", "2022 + g % 3"}}, []fk{{"employee_id", "hr.employees"}}},
	{"hr", "job_postings", 60, []column{{"id", "int", id}, {"department_id", "int", ref(1, nDepts)}, {"job_title", "text", pick(1, "engineer", "account executive", "analyst", "designer")},
		{"opened_on", "date", day(13)}, {"closed_on", "date", "CASE WHEN g % 3 = 0 THEN NULL ELSE " + day(13) + " + 40 END"}}, []fk{{"department_id", "hr.departments"}}},
	// support
	{"support", "tickets", nTickets, []column{{"id", "int", id}, {"customer_id", "int", ref(11, nCustomers)},
		{"opened_at", "timestamp", "TIMESTAMP '2023-01-01' + (g * 5) % 700 * INTERVAL '1 day'"}, {"closed_at", "timestamp", "CASE WHEN g % 4 = 0 THEN NULL ELSE TIMESTAMP '2023-01-01' + ((g * 5) % 700 + g % 6) * INTERVAL '1 day' END"},
		{"priority", "text", pick(1, "low", "normal", "high", "urgent")}, {"ticket_status", "text", "CASE WHEN g % 4 = 0 THEN 'open' ELSE 'closed' END"}, {"agent_id", "int", ref(3, nAgents)}},
		[]fk{{"customer_id", "crm.customers"}, {"agent_id", "support.agents"}}},
	{"support", "agents", nAgents, []column{{"id", "int", id}, {"agent_name", "text", "'Agent ' || g"}, {"team", "text", pick(1, "tier 1", "tier 2", "billing desk", "enterprise")}}, nil},
	{"support", "ticket_comments", 1200, []column{{"id", "int", id}, {"ticket_id", "int", ref(7, nTickets)}, {"comment_author", "text", pick(1, "agent", "customer")},
		{"written_at", "timestamp", "TIMESTAMP '2023-01-01' + (g * 3) % 700 * INTERVAL '1 day'"}}, []fk{{"ticket_id", "support.tickets"}}},
	{"support", "satisfaction_surveys", 350, []column{{"id", "int", id}, {"ticket_id", "int", ref(1, nTickets)}, {"survey_score", "int", "1 + (g * 3) % 5"}},
		[]fk{{"ticket_id", "support.tickets"}}},
	// marketing
	{"marketing", "campaigns", nCampaigns, []column{{"id", "int", id}, {"campaign_name", "text", "'Campaign ' || g"}, {"channel", "text", pick(1, "email", "social", "search")},
		{"started_on", "date", day(29)}, {"budget", "numeric(12,2)", money(53, 1000, 40000)}}, nil},
	{"marketing", "campaign_touches", 1500, []column{{"id", "int", id}, {"campaign_id", "int", ref(7, nCampaigns)}, {"customer_id", "int", ref(13, nCustomers)},
		{"touched_on", "date", day(1)}}, []fk{{"campaign_id", "marketing.campaigns"}, {"customer_id", "crm.customers"}}},
	{"marketing", "email_sends", 240, []column{{"id", "int", id}, {"campaign_id", "int", ref(1, nCampaigns)}, {"sent_on", "date", day(3)},
		{"opens", "int", "(g * 17) % 900"}, {"clicks", "int", "(g * 7) % 120"}}, []fk{{"campaign_id", "marketing.campaigns"}}},
	{"marketing", "web_sessions", 2000, []column{{"id", "int", id}, {"customer_id", "int", ref(3, nCustomers)},
		{"started_at", "timestamp", "TIMESTAMP '2023-01-01' + (g % 700) * INTERVAL '1 day'"}, {"page_views", "int", "1 + g % 25"},
		{"utm_source", "text", pick(1, "google", "newsletter", "linkedin", "direct")}}, []fk{{"customer_id", "crm.customers"}}},
	// finance
	{"finance", "general_ledger", 1200, []column{{"id", "int", id}, {"account_code", "text", pick(1, "4000", "4100", "5000", "6100", "7200")},
		{"posted_on", "date", day(1)}, {"debit", "numeric(12,2)", money(19, 0, 9000)}, {"credit", "numeric(12,2)", money(23, 0, 9000)}}, nil},
	{"finance", "budgets", 21, []column{{"id", "int", id}, {"department_id", "int", ref(1, nDepts)}, {"fiscal_year", "int", "2022 + (g - 1) / 7"},
		{"budget_amount", "numeric(14,2)", money(101, 100000, 900000)}}, []fk{{"department_id", "hr.departments"}}},
	{"finance", "expenses", 900, []column{{"id", "int", id}, {"employee_id", "int", ref(11, nEmployees)}, {"spent_on", "date", day(1)},
		{"expense_category", "text", pick(1, "travel", "meals", "software", "equipment", "training")}, {"expense_amount", "numeric(10,2)", money(13, 5, 2000)}},
		[]fk{{"employee_id", "hr.employees"}}},
	{"finance", "exchange_rates", 200, []column{{"id", "int", id}, {"currency", "text", pick(1, "USD", "GBP", "JPY", "CHF")},
		{"rate_to_eur", "numeric(12,6)", "round((0.5 + (g * 7) % 100 / 100.0)::numeric, 6)"}, {"rate_date", "date", "DATE '2024-01-01' + (g - 1) / 4"}}, nil},
	// analytics
	{"analytics", "daily_revenue", 730, []column{{"revenue_day", "date", "DATE '2023-01-01' + g - 1"}, {"revenue", "numeric(14,2)", money(37, 1000, 60000)}}, nil},
	{"analytics", "monthly_active_users", 24, []column{{"activity_month", "date", "(DATE '2023-01-01' + (g - 1) * INTERVAL '1 month')::date"}, {"active_users", "int", "1000 + (g * 137) % 3000"}}, nil},
	{"analytics", "churn_scores", nCustomers, []column{{"customer_id", "int", id}, {"churn_score", "numeric(4,3)", "round(((g * 37) % 1000 / 1000.0)::numeric, 3)"}, {"scored_on", "date", "DATE '2024-06-30'"}},
		[]fk{{"customer_id", "crm.customers"}}},
	{"analytics", "feature_usage", 1800, []column{{"id", "int", id}, {"customer_id", "int", ref(7, nCustomers)}, {"feature", "text", pick(1, "reports", "api", "exports", "dashboards", "alerts")},
		{"used_on", "date", day(1)}}, []fk{{"customer_id", "crm.customers"}}},
	// it
	{"it", "servers", nServers, []column{{"id", "int", id}, {"hostname", "text", "'srv-' || lpad(g::text, 3, '0')"}, {"datacenter", "text", pick(1, "fra1", "ams2", "iad1")},
		{"operating_system", "text", pick(1, "debian", "ubuntu", "windows")}}, nil},
	{"it", "incidents", 300, []column{{"id", "int", id}, {"server_id", "int", ref(7, nServers)},
		{"opened_at", "timestamp", "TIMESTAMP '2023-01-01' + (g * 3) % 700 * INTERVAL '1 day'"}, {"severity", "text", pick(1, "minor", "major", "critical", "minor")},
		{"resolved_at", "timestamp", "TIMESTAMP '2023-01-01' + ((g * 3) % 700 + 1) * INTERVAL '1 day'"}}, []fk{{"server_id", "it.servers"}}},
	{"it", "software_licenses", 30, []column{{"id", "int", id}, {"vendor", "text", pick(1, "Atlassian", "Microsoft", "Adobe", "Slack", "JetBrains")},
		{"seats", "int", "10 + (g * 13) % 200"}, {"renews_on", "date", day(23)}}, nil},
	{"it", "access_requests", 220, []column{{"id", "int", id}, {"employee_id", "int", ref(13, nEmployees)}, {"system_name", "text", pick(1, "crm", "erp", "vpn", "github")},
		{"requested_on", "date", day(3)}, {"granted", "boolean", "g % 3 <> 0"}}, []fk{{"employee_id", "hr.employees"}}},
	// legal
	{"legal", "contracts", 180, []column{{"id", "int", id}, {"customer_id", "int", ref(5, nCustomers)}, {"contract_type", "text", pick(1, "msa", "nda", "order form", "dpa")},
		{"signed_on", "date", day(7)}, {"contract_value", "numeric(12,2)", money(61, 1000, 200000)}}, []fk{{"customer_id", "crm.customers"}}},
	{"legal", "disputes", 25, []column{{"id", "int", id}, {"contract_id", "int", ref(7, 180)}, {"opened_on", "date", day(19)}, {"dispute_status", "text", pick(1, "open", "settled", "won")}},
		[]fk{{"contract_id", "legal.contracts"}}},
	// manufacturing
	{"manufacturing", "work_orders", 400, []column{{"id", "int", id}, {"product_id", "int", ref(3, nProducts)}, {"planned_quantity", "int", "10 + g % 90"},
		{"started_on", "date", day(3)}, {"work_order_status", "text", pick(1, "planned", "running", "done")}}, []fk{{"product_id", "product.products"}}},
	{"manufacturing", "quality_checks", 600, []column{{"id", "int", id}, {"work_order_id", "int", ref(7, 400)}, {"passed", "boolean", "g % 7 <> 0"},
		{"checked_on", "date", day(1)}}, []fk{{"work_order_id", "manufacturing.work_orders"}}},
	{"manufacturing", "machines", 18, []column{{"id", "int", id}, {"machine_name", "text", "'Machine ' || g"}, {"line", "text", pick(1, "A", "B", "C")}}, nil},
	{"manufacturing", "machine_downtime", 160, []column{{"id", "int", id}, {"machine_id", "int", ref(5, 18)}, {"down_minutes", "int", "5 + (g * 17) % 240"},
		{"down_on", "date", day(3)}}, []fk{{"machine_id", "manufacturing.machines"}}},
}

// variants are the empty copies beside each table: a name's prefix and
// suffix.
var variants = [][2]string{
	{"", "_archive"}, {"", "_history"}, {"stg_", ""}, {"", "_snapshot_2023"}, {"", "_backup"}, {"tmp_", "_import"}, {"", "_audit_log"},
}

// appTables are the application's own tables, in public.
var appTables = []string{
	"CREATE TABLE public.schema_migrations (version bigint PRIMARY KEY, applied_at timestamp)",
	"CREATE TABLE public.etl_job_runs (id int, job_name text, started_at timestamp, finished_at timestamp, rows_loaded bigint)",
	"CREATE TABLE public.feature_flags (flag text PRIMARY KEY, enabled boolean)",
	"CREATE TABLE public.app_settings (setting_key text PRIMARY KEY, setting_value text)",
}

// Schemas are the schemas of the database.
func Schemas() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range tables {
		if !seen[t.schema] {
			seen[t.schema] = true
			out = append(out, t.schema)
		}
	}
	return append(out, "public")
}

// Count is how many tables Create makes.
func Count() int { return len(tables)*(1+len(variants)) + len(appTables) }

// Create makes the tables in the database c is connected to (as its owner)
// and grants SELECT on every one of them to role, with USAGE on their
// schemas; then ANALYZE, so that row estimates are there.
func Create(ctx context.Context, c *pgx.Conn, role string) error {
	exec := func(q string) error {
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		return nil
	}
	for _, s := range Schemas() {
		if s != "public" {
			if err := exec("CREATE SCHEMA " + s); err != nil {
				return err
			}
		}
	}
	for _, t := range tables {
		defs := make([]string, len(t.cols))
		exprs := make([]string, len(t.cols))
		for i, col := range t.cols {
			defs[i] = col.name + " " + col.typ
			exprs[i] = col.expr
		}
		defs[0] += " PRIMARY KEY"
		if err := exec(fmt.Sprintf("CREATE TABLE %s (%s)", t.qualified(), strings.Join(defs, ", "))); err != nil {
			return err
		}
		if err := exec(fmt.Sprintf("INSERT INTO %s SELECT %s FROM generate_series(1, %d) g", t.qualified(), strings.Join(exprs, ", "), t.rows)); err != nil {
			return err
		}
		for _, v := range variants {
			cols := strings.Join(defs[1:], ", ")
			extra := ""
			if v[1] == "_audit_log" {
				extra = ", changed_at timestamp, changed_by text"
			}
			if err := exec(fmt.Sprintf("CREATE TABLE %s.%s%s%s (%s, %s%s)", t.schema, v[0], t.name, v[1], strings.TrimSuffix(defs[0], " PRIMARY KEY"), cols, extra)); err != nil {
				return err
			}
		}
	}
	for _, q := range appTables {
		if err := exec(q); err != nil {
			return err
		}
	}
	for _, t := range tables {
		for _, k := range t.fks {
			if err := exec(fmt.Sprintf("ALTER TABLE %s ADD FOREIGN KEY (%s) REFERENCES %s (id)", t.qualified(), k.col, k.ref)); err != nil {
				return err
			}
		}
	}
	for _, s := range Schemas() {
		if err := exec(fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", s, role)); err != nil {
			return err
		}
		if err := exec(fmt.Sprintf("GRANT SELECT ON ALL TABLES IN SCHEMA %s TO %s", s, role)); err != nil {
			return err
		}
	}
	return exec("ANALYZE")
}

// Patterns are the --tables patterns of a source over the database: every
// table of its schemas.
func Patterns() []string {
	var out []string
	for _, s := range Schemas() {
		out = append(out, s+".*")
	}
	return out
}
