package console

import (
	"net/http"
	"slices"
	"strings"

	"github.com/julienschmidt/httprouter"

	"dataservice/store/model"
)

// route is one page below /data/private/, a tool or a schema: the path below them, the
// ?do= it needs, the methods it answers and its handler. The console serves every page
// through a table of routes (the tools' in tools.go, the data pages' below), so a
// page's methods are declared next to it and the 404 and 405 answers come from one
// place (pick).
type route[H any] struct {
	// Path is the path below the tool or schema, without its leading and trailing
	// slashes: "" is their own page, a word is that segment, ":name" is one segment
	// (not empty), "*name" is the rest of the path (at least one character, slashes
	// kept). The named segments reach the handler in req.ps.
	Path string
	// Do, when set, is the value ?do= must have for the route to apply.
	Do string
	// Methods are the methods the page answers; any other gets 405 with Allow.
	Methods []string
	Serve   H
}

// pageFunc answers a page of a tool, or one of the data pages that are no schema's.
type pageFunc func(c *Console, w http.ResponseWriter, r *http.Request, q *req)

// schemaFunc answers a page of a schema the user may read.
type schemaFunc func(c *Console, w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema)

var (
	get     = []string{http.MethodGet}
	post    = []string{http.MethodPost}
	getPost = []string{http.MethodGet, http.MethodPost}
)

// dataRoutes are /data/private/ itself and a page of schemas, /data/private/<page>/
// (a name that is no tool and no schema).
var dataRoutes = []route[pageFunc]{
	{Path: "", Methods: get, Serve: (*Console).schemas},
	{Path: ":page", Methods: get, Serve: (*Console).schemas},
}

// schemaRoutes are the pages of a schema, below /data/private/<schema>/: the create
// form, the list (with the type-ahead lookup and the exports), and an instance's
// pages, which its ?do= chooses (instancePage).
var schemaRoutes = []route[schemaFunc]{
	{Path: "", Do: "new", Methods: getPost, Serve: (*Console).createPage},
	{Path: "", Methods: get, Serve: (*Console).schemaPage},
	{Path: "*key", Methods: getPost, Serve: (*Console).instancePage},
}

// pick finds the route of rest (the path below the tool or schema, without its leading
// and trailing slashes) for r, and puts the path's named segments in q.ps. When no
// route takes r it answers itself: 405 with the Allow header when a route has the path
// but not the method, else 404.
func pick[H any](c *Console, w http.ResponseWriter, r *http.Request, q *req, routes []route[H], rest string) (H, bool) {
	do := r.URL.Query().Get("do")
	var allow []string
	for i := range routes {
		rt := &routes[i]
		ps, ok := rt.match(rest)
		if !ok || (rt.Do != "" && rt.Do != do) {
			continue
		}
		if slices.Contains(rt.Methods, r.Method) {
			q.ps = ps
			return rt.Serve, true
		}
		for _, m := range rt.Methods {
			if !slices.Contains(allow, m) {
				allow = append(allow, m)
			}
		}
	}
	var none H
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		c.errorPage(w, r, q, http.StatusMethodNotAllowed, "method not allowed")
		return none, false
	}
	c.errorPage(w, r, q, http.StatusNotFound, "not found")
	return none, false
}

// match reports whether rest is the route's path, and the values of its named segments.
func (rt *route[H]) match(rest string) (httprouter.Params, bool) {
	if rt.Path == "" || rest == "" {
		return nil, rt.Path == rest
	}
	var ps httprouter.Params
	pattern := strings.Split(rt.Path, "/")
	for i, p := range pattern {
		if name, ok := strings.CutPrefix(p, "*"); ok {
			return append(ps, httprouter.Param{Key: name, Value: rest}), true
		}
		seg, after, more := strings.Cut(rest, "/")
		if name, ok := strings.CutPrefix(p, ":"); ok {
			if seg == "" {
				return nil, false
			}
			ps = append(ps, httprouter.Param{Key: name, Value: seg})
		} else if seg != p {
			return nil, false
		}
		last := i == len(pattern)-1
		if last || !more {
			if last && !more {
				return ps, true
			}
			return nil, false
		}
		rest = after
	}
	return nil, false // not reached: the last segment of the pattern returns
}
