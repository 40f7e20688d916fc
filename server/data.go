package server

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"dataservice/store"
	"dataservice/store/model"
)

type versionReply struct {
	Version      string `json:"version" yaml:"version"`
	VersionDate  string `json:"version_date" yaml:"version_date"`
	DBVersion    string `json:"db_version" yaml:"db_version"`
	InstanceUUID string `json:"instance_uuid" yaml:"instance_uuid"`
}

// versionInfo: GET /api/version/ — any authenticated caller.
func (s *server) versionInfo(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.denied(w, r) {
		return
	}
	dbv, _ := s.db.Registry(r.Context(), store.RegDBVersion)
	uid, _ := s.db.Registry(r.Context(), store.RegInstanceUUID)
	s.reply(w, r, http.StatusOK, versionReply{Version: s.version, VersionDate: s.date, DBVersion: dbv, InstanceUUID: uid})
}

// readableSchema loads a schema the caller may read; unreadable ones are a 403,
// missing ones a 404.
func (s *server) readableSchema(w http.ResponseWriter, r *http.Request, name string) *model.Schema {
	sch, err := s.db.Schema(r.Context(), name)
	if err != nil {
		s.fail(w, r, err)
		return nil
	}
	if !model.CanRead(principalOf(r).auth, sch) {
		s.writeError(w, r, http.StatusForbidden, "permission denied: reading "+sch.Keyname+" needs "+model.ReadPermission(sch))
		return nil
	}
	return sch
}

type schemaSummary struct {
	Keyname     string `json:"keyname" yaml:"keyname"`
	Displayname string `json:"displayname" yaml:"displayname"`
	Description string `json:"description" yaml:"description"`
	KeynameMode string `json:"keyname_mode" yaml:"keyname_mode"`
	IsEnabled   bool   `json:"is_enabled" yaml:"is_enabled"`
	IsBuiltin   bool   `json:"is_builtin" yaml:"is_builtin"`
	Count       int    `json:"count" yaml:"count"`
}

// schemaList: GET /api/schemas/ — the schemas the caller may read.
func (s *server) schemaList(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.denied(w, r, "p_data_access") {
		return
	}
	names, err := s.db.SchemaNames(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := []schemaSummary{}
	for _, n := range names {
		sch, err := s.db.Schema(r.Context(), n)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !model.CanRead(principalOf(r).auth, sch) {
			continue
		}
		count, err := s.db.CountInstances(r.Context(), n)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out = append(out, schemaSummary{Keyname: sch.Keyname, Displayname: sch.Displayname, Description: sch.Description,
			KeynameMode: sch.KeynameMode, IsEnabled: sch.IsEnabled, IsBuiltin: sch.IsBuiltin, Count: count})
	}
	s.reply(w, r, http.StatusOK, map[string]any{"count": len(out), "schemas": out})
}

// schemaDetail: GET /api/schemas/<name>/ — the schema in the load format, with fields.
func (s *server) schemaDetail(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if s.denied(w, r, "p_data_access") {
		return
	}
	if sch := s.readableSchema(w, r, ps.ByName("name")); sch != nil {
		s.reply(w, r, http.StatusOK, sch.Doc())
	}
}

type instanceListReply struct {
	Count     int          `json:"count" yaml:"count"`
	Page      int          `json:"page" yaml:"page"`
	Size      int          `json:"size" yaml:"size"`
	Instances []*model.Doc `json:"instances" yaml:"instances"`
}

// instanceKey is the keyname in the *rest of /api/instances/:schema/<key>/.
func instanceKey(rest string) string { return strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/") }

// instances: GET /api/instances/<schema>/ (list: page, size, search) and
// GET /api/instances/<schema>/<keyname>/ (one instance; keynames may contain /).
func (s *server) instances(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if s.denied(w, r, "p_data_access") {
		return
	}
	rest := ps.ByName("rest")
	if !strings.HasSuffix(rest, "/") {
		s.writeError(w, r, http.StatusNotFound, "not found")
		return
	}
	sch := s.readableSchema(w, r, ps.ByName("schema"))
	if sch == nil {
		return
	}
	if rest != "/" {
		in, err := s.db.Instance(r.Context(), sch.Keyname, instanceKey(rest))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		// The ETag is what If-Match on PUT, PATCH and DELETE compares with.
		w.Header().Set("ETag", store.ETag(in))
		s.reply(w, r, http.StatusOK, s.db.InstanceDocAs(r.Context(), principalOf(r).auth, sch, in))
		return
	}
	q := r.URL.Query()
	maxSize := s.db.ConfigInt(r.Context(), store.ConfigDataMaxSize)
	size := s.db.ConfigInt(r.Context(), store.ConfigDataDefaultSize)
	if size > maxSize {
		size = maxSize
	}
	page := 1
	if v := q.Get("size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSize {
			s.writeError(w, r, http.StatusBadRequest, "size must be an integer from 1 to "+strconv.Itoa(maxSize))
			return
		}
		size = n
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			s.writeError(w, r, http.StatusBadRequest, "page must be an integer from 1 to 1000000")
			return
		}
		page = n
	}
	lq := store.ListQuery{Search: q.Get("search"), Offset: (page - 1) * size, Limit: size}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.writeError(w, r, http.StatusBadRequest, "after must be the non-negative integer cursor of a previous page")
			return
		}
		if q.Get("page") != "" {
			s.writeError(w, r, http.StatusBadRequest, "page and after cannot be combined")
			return
		}
		lq.After, lq.Offset, page = n, 0, 0
	}
	switch q.Get("count") {
	case "":
	case "exact":
		lq.ExactCount = true
	default:
		s.writeError(w, r, http.StatusBadRequest, "count must be exact")
		return
	}
	res, err := s.db.ListInstances(r.Context(), sch, lq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	docs := make([]*model.Doc, 0, len(res.Instances))
	for _, in := range res.Instances {
		docs = append(docs, s.db.InstanceDocAs(r.Context(), principalOf(r).auth, sch, in))
	}
	if !res.CountExact {
		w.Header().Set("X-Count-Exact", "false")
	}
	if res.Next != 0 {
		next := url.Values{"after": {strconv.FormatInt(res.Next, 10)}, "size": {strconv.Itoa(size)}}
		if lq.Search != "" {
			next.Set("search", lq.Search)
		}
		w.Header().Set("X-Next-After", strconv.FormatInt(res.Next, 10))
		w.Header().Set("Link", "<"+r.URL.Path+"?"+next.Encode()+`>; rel="next"`)
	}
	s.reply(w, r, http.StatusOK, instanceListReply{Count: res.Count, Page: page, Size: size, Instances: docs})
}
