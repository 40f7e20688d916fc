package console

import (
	"net/http"
	"strconv"

	"dataservice/store"
)

type revisionsData struct {
	Rows    []revisionRow
	NextURL string
}

// revisions: GET /data/private/revision/ — the newest changes to what the user may
// read (schemas and permissions only with their import permission), 50 a page.
func (c *Console) revisions(w http.ResponseWriter, r *http.Request, q *req) {
	ctx := r.Context()
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	readable := map[string]bool{}
	allowed := func(cls string) bool {
		ok, seen := readable[cls]
		if seen {
			return ok
		}
		switch cls {
		case "_schema":
			ok = q.auth.Has("p_schema_import")
		case "_permission":
			ok = q.auth.Has("p_permission_import")
		default:
			sch, err := c.db.Schema(ctx, cls)
			ok = err == nil && store.CanRead(q.auth, sch)
		}
		readable[cls] = ok
		return ok
	}
	const size = 50
	revs, err := c.db.RecentRevisions(ctx, max(before, 0), size, allowed)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	d := revisionsData{}
	for _, rv := range revs {
		d.Rows = append(d.Rows, revisionRow{Revision: rv, Changes: changes(rv.Before, rv.After)})
	}
	if len(revs) == size {
		d.NextURL = "?before=" + strconv.FormatInt(revs[len(revs)-1].ID, 10)
	}
	c.render(w, r, q, http.StatusOK, "revisions", "Revisions", d)
}
