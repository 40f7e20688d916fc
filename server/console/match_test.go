package console

import (
	"net/http"
	"slices"
	"testing"
)

func TestRouteMatch(t *testing.T) {
	for _, tc := range []struct {
		path, rest string
		ok         bool
		params     map[string]string
	}{
		{"", "", true, nil},
		{"", "x", false, nil},
		{"vlan", "vlan", true, nil},
		{"vlan", "vlans", false, nil},
		{"vlan", "", false, nil},
		{":id", "12", true, map[string]string{"id": "12"}},
		{":id", "12/x", false, nil},
		{":handle/cancel", "abc/cancel", true, map[string]string{"handle": "abc"}},
		{":handle/cancel", "abc/cancel/x", false, nil},
		{":handle/cancel", "abc", false, nil},
		{":handle/cancel", "/cancel", false, nil},
		{"*cidr", "10.0.0.0/24", true, map[string]string{"cidr": "10.0.0.0/24"}},
		{"*key", "a//b", true, map[string]string{"key": "a//b"}},
		{"*key", "", false, nil},
	} {
		rt := route[pageFunc]{Path: tc.path}
		ps, ok := rt.match(tc.rest)
		if ok != tc.ok {
			t.Errorf("%q matching %q: %v, want %v", tc.path, tc.rest, ok, tc.ok)
			continue
		}
		if len(ps) != len(tc.params) {
			t.Errorf("%q matching %q: params %v, want %v", tc.path, tc.rest, ps, tc.params)
		}
		for k, v := range tc.params {
			if got := ps.ByName(k); got != v {
				t.Errorf("%q matching %q: %s is %q, want %q", tc.path, tc.rest, k, got, v)
			}
		}
	}
}

// TestRoutesUseRegisteredMethods: Register routes only GET and POST below
// /data/private/, so a route declaring another method could never be reached.
func TestRoutesUseRegisteredMethods(t *testing.T) {
	var methods [][]string
	for _, tl := range tools {
		for _, rt := range tl.Routes {
			methods = append(methods, rt.Methods)
		}
	}
	for _, rt := range dataRoutes {
		methods = append(methods, rt.Methods)
	}
	for _, rt := range schemaRoutes {
		methods = append(methods, rt.Methods)
	}
	for _, ms := range methods {
		if len(ms) == 0 {
			t.Errorf("a route answers no method")
		}
		for _, m := range ms {
			if m != http.MethodGet && m != http.MethodPost {
				t.Errorf("a route declares %s, which Register does not route", m)
			}
		}
	}
	if !slices.ContainsFunc(tools, func(tl tool) bool { return len(tl.Routes) > 0 }) {
		t.Fatal("no tool declares a route")
	}
}
