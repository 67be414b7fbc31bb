package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"datachat"
)

// datachat keys create, list and revoke; createKey makes a user's key (the
// user created if new) and records it in the audit log.

// createKey creates a key for the user of this name (created if new),
// records it in the audit log (why says why it was made) and returns it; a
// key the audit log cannot record is revoked and not returned.
func (m *Main) createKey(ctx context.Context, user, why string) (string, error) {
	u, err := m.Store.EnsureUser(ctx, user)
	if err != nil {
		return "", err
	}
	secret, hash, prefix := datachat.NewAPIKeySecret()
	k := &datachat.APIKey{UserID: u.ID, Hash: hash, Prefix: prefix}
	if err := m.Store.CreateAPIKey(ctx, k); err != nil {
		return "", err
	}
	detail := fmt.Sprintf("key %s… for user %s", prefix, u.Name)
	if why != "" {
		detail += ", " + why
	}
	err = m.record(ctx, &datachat.AuditEvent{Kind: datachat.AuditKeyCreated, Outcome: datachat.AuditOK, Target: k.ID, Detail: detail},
		func(ctx context.Context) error { return m.Store.RevokeAPIKey(ctx, k.ID) })
	if err != nil {
		return "", err
	}
	return secret, nil
}

func (m *Main) runKeys(ctx context.Context) error {
	if _, err := m.openStore(ctx); err != nil {
		return err
	}
	switch sub := m.flags.sub; sub {
	case "create":
		name := strings.TrimSpace(m.flags.user)
		key, err := m.createKey(ctx, name, "")
		if code := datachat.ErrorCode(err); code == datachat.EINVALID {
			return fmt.Errorf("keys create: %s", datachat.ErrorMessage(err))
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(m.Stdout, key)
		fmt.Fprintf(m.Stderr, "created an API key for user %s; it is shown only once. Sign in to the page with it at\n\n  %s\n\n", name, m.signInURL(m.Config.Addr, key))
		return nil
	case "list":
		keys, err := m.Store.APIKeys(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tUSER\tPREFIX\tCREATED\tLAST USED\tREVOKED")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\t%s\n", k.ID, k.UserName, k.Prefix,
				k.CreatedAt.Format(time.RFC3339), timeOrDash(k.LastUsedAt), timeOrDash(k.RevokedAt))
		}
		return tw.Flush()
	case "revoke":
		id := m.Args[0]
		keys, err := m.Store.APIKeys(ctx)
		if err != nil {
			return err
		}
		detail := "key " + id
		if i := slices.IndexFunc(keys, func(k *datachat.APIKey) bool { return k.ID == id }); i >= 0 {
			detail = fmt.Sprintf("key %s… of user %s", keys[i].Prefix, keys[i].UserName)
		}
		if err := m.Store.RevokeAPIKey(ctx, id); err != nil {
			return fmt.Errorf("keys revoke: %s", datachat.ErrorMessage(err))
		}
		fmt.Fprintf(m.Stderr, "revoked key %s\n", id)
		return m.record(ctx, &datachat.AuditEvent{Kind: datachat.AuditKeyRevoked, Outcome: datachat.AuditOK, Target: id, Detail: detail}, nil)
	}
	return fmt.Errorf("keys: unknown subcommand %q: want create, list or revoke", m.flags.sub)
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}
