package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"datachat"
	"datachat/internal/workspace"
)

const dictionaryUsage = `Usage: datachat dictionary export --conversation ID [--user NAME] > dictionary.yaml
       datachat dictionary import --conversation ID [--user NAME] FILE   (- for stdin)

The data dictionary of a stored conversation as a YAML file: its notes, the
descriptions of its datasets and their columns, the semantic layer of each
(metrics, synonyms, relationships), and the same of its database sources'
tables (see README.md, "Data dictionary"). export writes it to stdout; import
applies a file to it — what the file gives replaces what is stored, the rest
stays — after checking every table and column it names (a source's against
its catalog); a file that does not fit changes nothing.
`

// dictionaryFlags are the flags of dictionary import and export.
func dictionaryFlags(fs *flag.FlagSet, f *cmdFlags) {
	fs.StringVar(&f.conversation, "conversation", "", "the `ID` of the conversation")
	fs.StringVar(&f.user, "user", localUser, "the `NAME` of the user the conversation is of")
}

// parseDictionary reads `dictionary import|export`'s flags.
func (m *Main) parseDictionary(args []string) error {
	f := &m.flags
	args, err := m.subcommand("dictionary", args, "import", "import", "export")
	if err != nil {
		return err
	}
	fs := commandFlags("dictionary", f.sub, f)
	usageText := helpText("dictionary", fs)
	if m.Args, err = m.parseArgs(fs, args, usageText); err != nil {
		return err
	}
	wrong := func(msg string) error { return &usageError{msg, usageText} }
	switch {
	case strings.TrimSpace(f.conversation) == "":
		return wrong("dictionary " + f.sub + ": want --conversation ID")
	case f.sub == "export" && len(m.Args) > 0:
		return wrong(fmt.Sprintf("dictionary export takes no arguments, got %q", m.Args))
	case f.sub == "import" && len(m.Args) != 1:
		return wrong("dictionary import: want one FILE (- for stdin)")
	}
	return nil
}

// runDictionary is `datachat dictionary import|export`.
func (m *Main) runDictionary(ctx context.Context) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	f := m.flags
	user, err := st.EnsureUser(ctx, f.user)
	if err != nil {
		return fmt.Errorf("dictionary %s: --user %s: %s", f.sub, f.user, datachat.ErrorMessage(err))
	}
	conv, err := st.Conversation(ctx, user.ID, f.conversation)
	if err != nil {
		return fmt.Errorf("dictionary %s: conversation %s of user %s: %s", f.sub, f.conversation, user.Name, datachat.ErrorMessage(err))
	}
	if f.sub == "import" {
		if err := m.importDictionary(ctx, st, user, conv); err != nil {
			return fmt.Errorf("dictionary import: %s", datachat.ErrorMessage(err))
		}
	}
	if f.sub == "export" {
		ds, err := st.Datasets(ctx, conv.ID)
		if err != nil {
			return err
		}
		layer, err := st.SemanticLayer(ctx, conv.ID)
		if err != nil {
			return err
		}
		b, err := workspace.DictionaryYAML(workspace.DictionaryOf(conv, ds, layer))
		if err != nil {
			return err
		}
		_, err = m.Stdout.Write(b)
		return err
	}
	return nil
}

// importDictionary applies the file m.Args[0] to conv's dictionary.
func (m *Main) importDictionary(ctx context.Context, st datachat.Store, user *datachat.User, conv *datachat.Conversation) error {
	var r io.Reader = m.Stdin
	if p := m.Args[0]; p != "-" {
		fh, err := os.Open(p)
		if err != nil {
			return err
		}
		defer fh.Close()
		r = fh
	}
	b, err := io.ReadAll(io.LimitReader(r, workspace.MaxDictionaryBytes+1))
	if err != nil {
		return err
	}
	d, err := workspace.ParseDictionary(ctx, b)
	if err != nil {
		return err
	}
	if len(d.Sources) > 0 {
		if d, err = m.newSources(st).ResolveDictionary(ctx, user, conv.ID, d); err != nil {
			return err
		}
	}
	if err := st.UpdateDictionary(ctx, user.ID, conv.ID, d); err != nil {
		return err
	}
	tables := len(d.Datasets)
	for _, t := range d.Sources {
		tables += len(t)
	}
	notes := ""
	if d.Notes != nil {
		notes = ", the notes"
	}
	fmt.Fprintf(m.Stderr, "dictionary of conversation %s updated: %d table%s%s\n", conv.ID, tables, map[bool]string{true: "", false: "s"}[tables == 1], notes)
	return nil
}
