package server

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"datachat"
)

// Database sources in the admin API: GET /api/admin/sources lists every
// source and whom it is granted to; PUT …/grants changes whom, recorded in
// the audit log.

// adminSource is a database source as the admin API lists it: never its
// URL.
type adminSource struct {
	Name     string    `json:"name"`
	Kind     string    `json:"kind"`
	Tables   []string  `json:"tables"`
	Users    []string  `json:"users"`
	AllUsers bool      `json:"all_users"`
	Origin   string    `json:"origin"`
	Created  time.Time `json:"created_at"`
}

func adminSourceOf(d *datachat.DBSource) adminSource {
	return adminSource{Name: d.Name, Kind: d.Kind, Tables: nonNil(d.Tables), Users: nonNil(d.Users), AllUsers: d.AllUsers, Origin: d.Origin, Created: d.CreatedAt}
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// listAllSources is GET /api/admin/sources: every database source and whom
// it is granted to.
func (s *Server) listAllSources(w http.ResponseWriter, r *http.Request) {
	list, err := s.Store.DBSources(r.Context())
	if err != nil {
		s.error(w, r, err)
		return
	}
	out := make([]adminSource, len(list))
	for i, d := range list {
		out[i] = adminSourceOf(d)
	}
	writeList(w, "sources", out)
}

// grantsRequest is PUT /api/admin/sources/{name}/grants's body.
type grantsRequest struct {
	Users    *[]string `json:"users"`
	AllUsers *bool     `json:"all_users"`
}

// putGrants is PUT /api/admin/sources/{name}/grants: whom the source is
// granted to — named users, or every user —, as `datachat sources add`
// sets it with --users and --all-users. A source from DATACHAT_SOURCES is
// changed in its file instead, which serve applies at its start. The
// change reaches running turns at their next query: every use reads the
// grant from the store.
func (s *Server) putGrants(w http.ResponseWriter, r *http.Request) {
	var req grantsRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	if req.Users == nil && req.AllUsers == nil {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, `Give whom the source is granted to: {"users": ["alice", …]} or {"all_users": true}.`))
		return
	}
	all := req.AllUsers != nil && *req.AllUsers
	var users []string
	if req.Users != nil {
		for _, u := range *req.Users {
			if !slices.Contains(users, u) {
				users = append(users, u)
			}
		}
	}
	if all && len(users) > 0 {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, `Give named "users" or "all_users": true, not both.`))
		return
	}
	ctx := r.Context()
	var unknown []string
	for _, u := range users {
		err := datachat.CheckUserName(u)
		if err == nil {
			_, err = s.Store.AccountByName(ctx, u)
		} else {
			err = datachat.Errorf(datachat.ENOTFOUND, "no user may have this name")
		}
		if datachat.ErrorCode(err) == datachat.ENOTFOUND {
			unknown = append(unknown, `"`+datachat.AuditLine(u, 100)+`"`)
		} else if err != nil {
			s.error(w, r, err)
			return
		}
	}
	if len(unknown) > 0 {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "No user named %s: grant a source to existing users.", strings.Join(unknown, ", ")))
		return
	}
	name := r.PathValue("name")
	old, err := s.Store.DBSource(ctx, name)
	if datachat.ErrorCode(err) == datachat.ENOTFOUND {
		err = datachat.Errorf(datachat.ENOTFOUND, "No database source named %q.", datachat.AuditLine(name, 100))
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	if old.Origin == datachat.OriginConfig {
		s.error(w, r, datachat.Errorf(datachat.ECONFLICT, "The source %s comes from DATACHAT_SOURCES in serve's --config file: change its users there (serve applies the file when it starts), or the file would undo this change.", name))
		return
	}
	def := *old
	def.Users, def.AllUsers = users, all
	if all {
		def.Users = nil
	}
	if grantText(old) != grantText(&def) {
		if err := s.Store.UpdateDBSource(ctx, &def); err != nil {
			s.error(w, r, err)
			return
		}
		err := s.record(r, &datachat.AuditEvent{Kind: datachat.AuditSourceGranted, Outcome: datachat.AuditOK, Source: name, Target: name,
			Detail: grantText(old) + " → " + grantText(&def) + ", through the API"},
			func(ctx context.Context) error { return s.Store.UpdateDBSource(ctx, old) })
		if err != nil {
			s.error(w, r, err)
			return
		}
	}
	cur, err := s.Store.DBSource(ctx, name)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, adminSourceOf(cur))
}

// grantText says whom a source is granted to, as `datachat sources` does.
func grantText(d *datachat.DBSource) string {
	switch {
	case d.AllUsers:
		return "granted to every user"
	case len(d.Users) == 0:
		return "granted to no user"
	}
	return "granted to " + strings.Join(d.Users, ", ")
}
