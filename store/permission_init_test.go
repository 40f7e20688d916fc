package store_test

import (
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// A permission the built-in definitions add with the init action (the data-version
// blocks' "add") that already exists as a user's becomes built-in, so the normal
// delete refuses it; its texts stay as the user wrote them.
func TestSystemInitMakesAUsersPermissionBuiltin(t *testing.T) {
	t.Parallel()
	db := openEmptyDB(t)
	mustLoad(t, db, `- {classname: _permission, keyname: p_api_conf, description: mine}`, store.LoadOptions{})
	if got := queryInt(t, db, "SELECT is_builtin FROM permissions WHERE keyname = 'p_api_conf'"); got != 0 {
		t.Fatalf("a user's permission is built-in: %d", got)
	}
	mustLoad(t, db, `- {classname: _permission, keyname: p_api_conf, description: builtin text}`,
		store.LoadOptions{System: true, Action: model.ActionInit})
	if got := queryInt(t, db, "SELECT is_builtin FROM permissions WHERE keyname = 'p_api_conf'"); got != 1 {
		t.Fatalf("is_builtin = %d after the built-in add, want 1", got)
	}
	if got := queryString(t, db, "SELECT description FROM permissions WHERE keyname = 'p_api_conf'"); got != "mine" {
		t.Fatalf("description = %q, want the user's text kept", got)
	}
	res := load(t, db, `- {classname: _permission, keyname: p_api_conf, _action: delete}`, store.LoadOptions{})
	if res.Errors != 1 || res.Deleted != 0 {
		t.Fatalf("delete of the now built-in permission: %+v; want refused", res)
	}
}
