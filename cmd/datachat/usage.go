package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

const usage = `Usage: datachat [--config FILE] COMMAND [ARGS]
       datachat --version

Commands:
  serve                                   run the web UI and API
  sql [--data FILE_OR_URL]… [--format table|csv|json] "SELECT …"
                                          run SQL over files in the sandboxed engine
  users add NAME [--admin]                add a user; prints their one-time invite URL
  users list [--json]                     list users: role, sign-in, status, last seen
  users disable|enable|reset|remove NAME  disable, enable, a new invite URL, remove
  users role NAME admin|member            change a user's role
  keys create --user NAME                 create an API key (printed once)
  keys list                               list API keys
  keys revoke ID                          revoke an API key
  sources add NAME --url URL [--tables PATTERNS] [--users NAMES | --all-users]
                                          add a PostgreSQL or MySQL/MariaDB database as a source
  sources list                            list database sources (URLs without passwords)
  sources remove NAME                     remove a source, detaching it everywhere
  dictionary export --conversation ID [--user NAME]
                                          a conversation's data dictionary as YAML, on stdout
  dictionary import --conversation ID [--user NAME] FILE
                                          apply a dictionary file (semantic layer included)
  audit [--since TIME] [--until TIME] [--user NAME] [--source NAME] [--kind KIND] [--limit N] [--json]
                                          the audit log: queries on sources, users, keys, sources changed
  ask [--data FILE_OR_URL]… [--doc FILE]… "question"
                                          one chat turn in the terminal
  mcp [--conversation ID | --data FILE_OR_URL]…
                                          the data tools as an MCP server on stdio
  eval SUITE [--out FILE] [--no-dictionary] [--no-examples]
                                          measure the chat's accuracy on a suite of questions
  eval --compare A B                      compare two results of eval --out
  migrate                                 apply pending database migrations
  version                                 the version, commit, Go and DuckDB versions
  help [COMMAND]                          this text, or a command's

Configuration comes from the environment (see README.md); --config FILE,
before or after the command, reads the same variables from a YAML file, and
the environment wins. Data is kept in
DATACHAT_DATA_DIR, by default one directory per user whatever the working
directory ($XDG_DATA_HOME/datachat or ~/.local/share/datachat); each command
names it on stderr when it starts.
`

// A command's usage: its synopsis lines and what it does; its flags are
// listed after them.
var commandUsage = map[string]string{
	"serve": `Usage: datachat serve

Runs the web UI and the API on DATACHAT_ADDR (default 127.0.0.1:8080). On its
first start, with no users yet, it creates the administrator admin and prints
a one-time setup URL (…/#invite=…) that sets admin's password; it works for 7
days, and datachat users reset admin makes a new one.
`,
	"sql": `Usage: datachat sql [--data FILE_OR_URL]… [--format table|csv|json] [--max-rows N] "SELECT …"

Runs one SQL statement over the files in the sandboxed engine, with no LLM;
tables are named from the file names, in order. Every row of the result is
printed unless --max-rows caps them. Nothing is stored.
`,
	"ask": `Usage: datachat ask [--data FILE_OR_URL]… [--doc FILE]… "question"

One chat turn in the terminal: the answer on stdout, the tool calls on stderr.
Needs a model: GEMINI_API_KEY, OPENAI_API_KEY or OLLAMA_HOST. Nothing is
stored.
`,
	"mcp": `Usage: datachat mcp [--conversation ID | --data FILE_OR_URL…]

Serves the data tools (list_datasets, describe_dataset, load_dataset,
execute_sql, search_documents, list_tables, describe_table) as a Model
Context Protocol server on stdio,
for user local: on one of its stored conversations (--conversation), or on
the --data files in a temporary workspace that keeps nothing, as sql and ask
do.
`,
	"keys": `Usage: datachat keys create --user NAME   create an API key: the key alone on stdout, once (the page's sign-in URL on stderr)
       datachat keys list                 list the API keys: id, user, created, last used
       datachat keys revoke ID            revoke an API key (its ID from keys list)
`,
	"eval": `Usage: datachat eval SUITE [--out FILE] [--no-dictionary] [--no-examples] [--min-execution-accuracy X]
       datachat eval --compare A B

Runs each question of SUITE (a JSON or YAML file; see README.md) through one
chat turn with the configured model, in a new conversation holding its
datasets, and scores it: execution match (the turn's last successful SQL
result against the expected rows, or the gold SQL's), answer match (the
answer's text holds the expected numbers), tool calls, failed SQL, tokens and
seconds. Prints a table (progress on stderr); --out writes the results as
JSON, which --compare A B sets side by side. The suite's dictionary and
verified examples are used unless --no-dictionary or --no-examples turn
them off. Needs a model: GEMINI_API_KEY, OPENAI_API_KEY or OLLAMA_HOST.
Nothing is kept but --out. The exit status is 1 when a question failed with
an error, or when the execution accuracy is below --min-execution-accuracy.
`,
	"sources":    sourcesUsage,
	"users":      usersUsage,
	"audit":      auditUsage,
	"dictionary": dictionaryUsage,
	"migrate": `Usage: datachat migrate

Applies pending database migrations (serve also applies them when it starts).
`,
	"version": `Usage: datachat version   (or datachat --version)

Prints datachat's version, the commit it was built from, and the versions of
Go and DuckDB it was built with.
`,
}

// cmdFlags holds the flags of every command; each command defines its own.
type cmdFlags struct {
	config       string // --config after the command
	sub          string // keys: create, list or revoke
	data, docs   listFlag
	format       string
	maxRows      int // sql: 0 for no cap
	conversation string
	user         string
	// eval
	out                      string
	compare                  bool
	noDictionary, noExamples bool
	minExecAccuracy          string
	// sources add
	url, tables, users string
	allUsers           bool
	// audit (and user)
	since, until, source, kind, outcome string
	limit                               int
	json                                bool
	// users
	admin, yes bool
}

// usageError is a wrong command line: main prints it with the usage and
// exits 2.
type usageError struct {
	msg   string
	usage string
}

func (e *usageError) Error() string { return e.msg }

// helpFor writes a command's usage and flags.
func helpFor(w io.Writer, name string, fs *flag.FlagSet) {
	fmt.Fprint(w, commandUsage[name])
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

func helpText(name string, fs *flag.FlagSet) string {
	var b bytes.Buffer
	helpFor(&b, name, fs)
	return b.String()
}

// subcommand takes the subcommand of name, one of subs, off args into
// m.flags.sub. Asked for help instead, it prints the command's usage and
// the flags of its subcommand helpSub on stdout and returns flag.ErrHelp;
// none, or one not in subs, is a usageError.
func (m *Main) subcommand(name string, args []string, helpSub string, subs ...string) ([]string, error) {
	want := "want " + strings.Join(subs[:len(subs)-1], ", ") + " or " + subs[len(subs)-1]
	if len(args) == 0 {
		return nil, &usageError{name + ": " + want, commandUsage[name]}
	}
	switch sub := args[0]; {
	case slices.Contains(subs, sub):
		m.flags.sub = sub
		return args[1:], nil
	case sub == "-h" || sub == "-help" || sub == "--help" || sub == "help":
		helpFor(m.Stdout, name, commandFlags(name, helpSub, &cmdFlags{}))
		return nil, flag.ErrHelp
	}
	return nil, &usageError{fmt.Sprintf("%s: unknown subcommand %q: %s", name, args[0], want), commandUsage[name]}
}

// parseArgs parses args with fs, flags before or after the arguments (see
// parseInterspersed), and returns the arguments. Asked for help, it prints
// usageText on stdout and returns flag.ErrHelp; a wrong flag is a
// usageError naming the command, with usageText.
func (m *Main) parseArgs(fs *flag.FlagSet, args []string, usageText string) ([]string, error) {
	rest, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(m.Stdout, usageText)
		return nil, err
	}
	if err != nil {
		return nil, &usageError{strings.TrimPrefix(fs.Name(), "datachat ") + ": " + err.Error(), usageText}
	}
	return rest, nil
}

// commandFlags returns the flag set of a command (sub: of keys), its
// flags stored in f.
func commandFlags(name, sub string, f *cmdFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(strings.TrimSpace("datachat "+name+" "+sub), flag.ContinueOnError)
	fs.SetOutput(io.Discard) // ParseFlags reports errors and help itself
	fs.Usage = func() {}
	fs.StringVar(&f.config, "config", "", "a YAML configuration `FILE` of the variables in README.md (the environment wins over it)")
	switch name {
	case "sql":
		fs.Var(&f.data, "data", "a data `FILE_OR_URL` (CSV, TSV, Parquet, Excel, JSON, NDJSON; compressed or not) (repeatable); tables are named from the file names, in order")
		fs.StringVar(&f.format, "format", "table", "output `format`: table, csv or json")
		fs.IntVar(&f.maxRows, "max-rows", 0, "print at most `N` rows (default: every row)")
	case "ask":
		fs.Var(&f.data, "data", "a data `FILE_OR_URL` (CSV, TSV, Parquet, Excel, JSON, NDJSON; compressed or not) (repeatable)")
		fs.Var(&f.docs, "doc", "a PDF, DOCX, Markdown, HTML or text document `FILE` (repeatable)")
	case "mcp":
		fs.StringVar(&f.conversation, "conversation", "", "the `ID` of a stored conversation of user "+localUser+" to work on")
		fs.Var(&f.data, "data", "a data `FILE_OR_URL` (CSV, TSV, Parquet, Excel, JSON, NDJSON; compressed or not) to load into a new conversation (repeatable)")
	case "eval":
		fs.StringVar(&f.out, "out", "", "write the results as JSON to `FILE`")
		fs.BoolVar(&f.compare, "compare", false, "compare two results written by --out: datachat eval --compare A B")
		fs.BoolVar(&f.noDictionary, "no-dictionary", false, "leave the data dictionary (descriptions and notes) out of the prompt")
		fs.BoolVar(&f.noExamples, "no-examples", false, "leave the verified examples out of the prompt")
		fs.StringVar(&f.minExecAccuracy, "min-execution-accuracy", "", "fail (exit status 1) when the execution accuracy is below `X`, a share from 0 to 1 or a percentage (0.8 or 80%)")
	case "keys":
		if sub == "create" {
			fs.StringVar(&f.user, "user", "", "the user's `NAME` (created if new)")
		}
	case "sources":
		if sub == "add" {
			sourcesAddFlags(fs, f)
		}
	case "audit":
		auditFlags(fs, f)
	case "users":
		usersFlags(fs, sub, f)
	case "dictionary":
		dictionaryFlags(fs, f)
	}
	return fs
}

// parseCommand reads the command's flags and arguments into m.flags and
// m.Args, before any configuration is read: help and a wrong command line
// need none.
func (m *Main) parseCommand(args []string) error {
	name := m.Command
	if _, ok := commandUsage[name]; !ok {
		return &usageError{fmt.Sprintf("unknown command %q", name), usage}
	}
	f := &m.flags
	if name == "sources" {
		return m.parseSources(args)
	}
	if name == "users" {
		return m.parseUsers(args)
	}
	if name == "dictionary" {
		return m.parseDictionary(args)
	}
	if name == "keys" {
		var err error
		if args, err = m.subcommand(name, args, "", "create", "list", "revoke"); err != nil {
			return err
		}
	}
	fs := commandFlags(name, f.sub, f)
	usageText := helpText(name, fs)
	// Flags may follow the arguments too: datachat eval SUITE --out FILE,
	// datachat keys revoke ID --config FILE.
	var err error
	if m.Args, err = m.parseArgs(fs, args, usageText); err != nil {
		return err
	}
	wrong := func(msg string) error { return &usageError{msg, usageText} }
	switch name {
	case "serve", "migrate", "version":
		if len(m.Args) > 0 {
			return wrong(fmt.Sprintf("%s takes no arguments, got %q", name, m.Args))
		}
	case "sql":
		if len(m.Args) != 1 {
			return wrong(`sql: want exactly one SQL statement as the last argument, after the flags: datachat sql --data FILE "SELECT …"`)
		}
		if f.format != "table" && f.format != "csv" && f.format != "json" {
			return wrong(fmt.Sprintf("sql: --format %q: want table, csv or json", f.format))
		}
		if f.maxRows < 0 {
			return wrong(fmt.Sprintf("sql: --max-rows %d: want a number of rows (0, the default, prints every row)", f.maxRows))
		}
	case "ask":
		if len(m.Args) != 1 {
			return wrong(`ask: want the question as the last argument, after the flags: datachat ask --data FILE "question"`)
		}
	case "eval":
		switch {
		case f.compare && len(m.Args) != 2:
			return wrong("eval --compare: want two results written by --out: datachat eval --compare A.json B.json")
		case f.compare && (f.out != "" || f.noDictionary || f.noExamples || f.minExecAccuracy != ""):
			return wrong("eval --compare takes no other flag")
		case !f.compare && len(m.Args) != 1:
			return wrong("eval: want one suite file: datachat eval SUITE [--out FILE]")
		}
		if f.minExecAccuracy != "" {
			if _, err := parseShare(f.minExecAccuracy); err != nil {
				return wrong("eval: --min-execution-accuracy " + err.Error())
			}
		}
	case "mcp":
		if len(m.Args) > 0 {
			return wrong(fmt.Sprintf("mcp: unexpected arguments %q: want [--conversation ID | --data FILE_OR_URL…]", m.Args))
		}
		if f.conversation != "" && len(f.data) > 0 {
			return wrong("mcp: use --conversation or --data, not both")
		}
	case "audit":
		if err := checkAuditFlags(f, m.Args); err != nil {
			return wrong(err.Error())
		}
	case "keys":
		switch {
		case f.sub == "create" && (strings.TrimSpace(f.user) == "" || len(m.Args) > 0):
			return wrong("keys create: want --user NAME")
		case f.sub == "list" && len(m.Args) > 0:
			return wrong(fmt.Sprintf("keys list takes no arguments, got %q", m.Args))
		case f.sub == "revoke" && len(m.Args) != 1:
			return wrong("keys revoke: want the key's ID (see keys list)")
		}
	}
	return nil
}

// help is `datachat help [COMMAND]`.
func (m *Main) help(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stdout, usage)
		return flag.ErrHelp
	}
	name := args[0]
	if _, ok := commandUsage[name]; !ok || len(args) > 1 {
		return &usageError{fmt.Sprintf("help: unknown command %q", strings.Join(args, " ")), usage}
	}
	if name == "sources" {
		helpFor(m.Stdout, name, commandFlags(name, "add", &cmdFlags{}))
		return flag.ErrHelp
	}
	if name == "dictionary" {
		helpFor(m.Stdout, name, commandFlags(name, "import", &cmdFlags{}))
		return flag.ErrHelp
	}
	helpFor(m.Stdout, name, commandFlags(name, "", &cmdFlags{}))
	return flag.ErrHelp
}

// exitCode reports err from ParseFlags (run false) or Run on m.Stderr and
// returns the exit status: 0 after help was asked for, 2 for a wrong command
// line (with the usage) or configuration, 1 for a command that failed.
func (m *Main) exitCode(err error, run bool) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(m.Stderr, "datachat: %s\n\n%s", ue.msg, ue.usage)
		return 2
	}
	fmt.Fprintln(m.Stderr, "datachat:", err)
	if run {
		return 1
	}
	return 2
}
