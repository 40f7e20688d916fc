package store_test

import (
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

func TestCheckKeyname(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key string
		ok        bool
	}{
		{"plain name is accepted", "srv-01", true},
		{"slash and dot are accepted", "dc1/rack.2", true},
		{"non-ASCII letters are accepted", "serveur-é", true},
		{"256 characters are accepted", strings.Repeat("é", 256), true},
		{"empty is refused", "", false},
		{"257 characters are refused", strings.Repeat("x", 257), false},
		{"inner space is refused", "a b", false},
		{"tab is refused", "a\tb", false},
		{"newline is refused", "a\nb", false},
		{"no-break space is refused", "a\u00a0b", false},
		{"control character is refused", "a\x01b", false},
		{"DEL is refused", "a\x7fb", false},
		{"invalid UTF-8 is refused", "a\xffb", false},
		{"right-to-left override is refused", "admin\u202egpj", false},
		{"zero-width space is refused", "ad\u200bmin", false},
		{"zero-width joiner is refused", "a\u200db", false},
		{"byte order mark is refused", "\ufeffadmin", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := model.CheckKeyname(tt.key)
			if got, want := err == nil, tt.ok; got != want {
				t.Fatalf("CheckKeyname(%q): got error %v, want ok=%v", tt.key, err, want)
			}
			if err != nil {
				if got, want := store.ErrorCode(err), model.EInvalid; got != want {
					t.Fatalf("error code: got %q, want %q", got, want)
				}
			}
		})
	}
}

func TestLoadRefusesBadKeynames(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema, store.LoadOptions{})
	tests := []struct{ name, doc string }{
		{"empty keyname", `{classname: server, keyname: ""}`},
		{"missing keyname", `{classname: server, hostname: h}`},
		{"keyname with a space", `{classname: server, keyname: "a b"}`},
		{"keyname with a control character", `{classname: server, keyname: "a\u0007b"}`},
		{"keyname longer than 256 characters", `{classname: server, keyname: ` + strings.Repeat("k", 257) + `}`},
		{"keyname that is a list", `{classname: server, keyname: [a, b]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			n := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'server'")
			res := load(t, db, tt.doc, store.LoadOptions{})
			if got, want := res.Errors, 1; got != want {
				t.Fatalf("errors: got %d, want %d", got, want)
			}
			if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'server'"), n; got != want {
				t.Fatalf("server rows: got %d, want %d", got, want)
			}
		})
	}
	t.Run("surrounding whitespace is trimmed", func(t *testing.T) {
		mustLoad(t, db, `{classname: server, keyname: "  srv9  "}`, store.LoadOptions{})
		instance(t, db, "server", "srv9")
	})
	t.Run("numeric keyname is read as text", func(t *testing.T) {
		mustLoad(t, db, `{classname: server, keyname: 1234}`, store.LoadOptions{})
		instance(t, db, "server", "1234")
	})
}

func TestHexIP(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"10.0.0.1", "0a000001"},
		{"192.168.1.10", "c0a8010a"},
		{"0.0.0.0", "00000000"},
		{"255.255.255.255", "ffffffff"},
		{"172.16.254.3", "ac10fe03"},
	}
	for _, tt := range tests {
		t.Run(tt.in+" is "+tt.want, func(t *testing.T) {
			got, err := model.HexIP(tt.in)
			if err != nil {
				t.Fatalf("HexIP(%s): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("HexIP(%s): got %s, want %s", tt.in, got, tt.want)
			}
			if !model.IsDottedIPv4(tt.in) {
				t.Fatalf("IsDottedIPv4(%s): got false, want true", tt.in)
			}
		})
	}
	for _, in := range []string{"", "10.0.0", "10.0.0.256", "10.0.0.01", "::1", "::ffff:10.0.0.1", "10.0.0.1/32", " 10.0.0.1", "0a000001"} {
		t.Run(strings.TrimSpace(in)+" is refused", func(t *testing.T) {
			if got, err := model.HexIP(in); err == nil {
				t.Fatalf("HexIP(%q): got %s, want an error", in, got)
			}
			if model.IsDottedIPv4(in) {
				t.Fatalf("IsDottedIPv4(%q): got true, want false", in)
			}
		})
	}
}

func TestKeynameModeHexip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc      string
		key, display   string // stored; key "" means refused
		wantErrContain string
	}{
		{"displayname 10.0.0.1 gives 0a000001", `{classname: ipam_ip, displayname: 10.0.0.1}`, "0a000001", "10.0.0.1", ""},
		{"displayname 192.168.1.10 gives c0a8010a", `{classname: ipam_ip, displayname: 192.168.1.10}`, "c0a8010a", "192.168.1.10", ""},
		{"displayname 0.0.0.0 gives 00000000", `{classname: ipam_ip, displayname: 0.0.0.0}`, "00000000", "0.0.0.0", ""},
		{"displayname 255.255.255.255 gives ffffffff", `{classname: ipam_ip, displayname: 255.255.255.255}`, "ffffffff", "255.255.255.255", ""},
		{"displayname with the matching hex keyname is accepted", `{classname: ipam_ip, keyname: 0a000002, displayname: 10.0.0.2}`, "0a000002", "10.0.0.2", ""},
		{"displayname with the same dotted keyname is accepted", `{classname: ipam_ip, keyname: 10.0.0.3, displayname: 10.0.0.3}`, "0a000003", "10.0.0.3", ""},
		{"dotted keyname without displayname becomes the displayname", `{classname: ipam_ip, keyname: 10.0.0.4}`, "0a000004", "10.0.0.4", ""},
		{"dotted keyname with an empty displayname becomes the displayname", `{classname: ipam_ip, keyname: 10.0.0.5, displayname: ""}`, "0a000005", "10.0.0.5", ""},
		{"non-address displayname is refused", `{classname: ipam_ip, displayname: gateway}`, "", "", "displayname"},
		{"displayname with leading zeros is refused", `{classname: ipam_ip, displayname: 10.0.0.07}`, "", "", "displayname"},
		{"displayname contradicting the keyname is refused", `{classname: ipam_ip, keyname: 0a000009, displayname: 10.0.0.1}`, "", "", "does not match"},
		{"non-address keyname without displayname is refused", `{classname: ipam_ip, keyname: gateway}`, "", "", "hexip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := newTestDB(t)
			res := load(t, db, tt.doc, store.LoadOptions{})
			if tt.key == "" {
				if got, want := res.Errors, 1; got != want {
					t.Fatalf("errors: got %d, want %d", got, want)
				}
				if msg := res.Messages[0].Message; !strings.Contains(msg, tt.wantErrContain) {
					t.Fatalf("message %q does not contain %q", msg, tt.wantErrContain)
				}
				if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'"), 0; got != want {
					t.Fatalf("ipam_ip rows: got %d, want %d", got, want)
				}
				return
			}
			if got, want := res.Created, 1; got != want {
				t.Fatalf("created: got %d, want %d (%s)", got, want, messages(res))
			}
			in := instance(t, db, "ipam_ip", tt.key)
			if got, want := in.Displayname, tt.display; got != want {
				t.Fatalf("displayname: got %q, want %q", got, want)
			}
			if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'"), 1; got != want {
				t.Fatalf("ipam_ip rows: got %d, want %d", got, want)
			}
		})
	}
	t.Run("a second load by address updates the same instance", func(t *testing.T) {
		db := newTestDB(t)
		mustLoad(t, db, `{classname: ipam_ip, displayname: 10.9.0.1, hostname: a}`, store.LoadOptions{})
		res := mustLoad(t, db, `{classname: ipam_ip, keyname: 10.9.0.1, hostname: b}`, store.LoadOptions{})
		if got, want := counts(res), "created=0 updated=1 unchanged=0 deleted=0 enabled=0 disabled=0 skipped=0 errors=0"; got != want {
			t.Fatalf("counts: got %s, want %s", got, want)
		}
		if got, want := fmtValue(instance(t, db, "ipam_ip", "0a090001").Data["hostname"]), "string(b)"; got != want {
			t.Fatalf("hostname: got %s, want %s", got, want)
		}
	})
}

func TestKeynameModeDataformat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key string
		ok  bool
	}{
		{"10.1.0.0/16", true},
		{"192.168.10.0/24", true},
		{"10.1.2.3/32", true},
		{"10.1.0.1/16", false},
		{"10.01.0.0/16", false},
		{"10.1.0.0/33", false},
		{"10.1.0.0", false},
		{"10.1.0.0/016", false},
		{"net-a", false},
	}
	for _, tt := range tests {
		name := tt.key + " is refused"
		if tt.ok {
			name = tt.key + " is accepted"
		}
		t.Run(name, func(t *testing.T) {
			db := newTestDB(t)
			res := load(t, db, `{classname: ipam_subnet, keyname: "`+tt.key+`", gateway: 10.1.0.1}`, store.LoadOptions{})
			if !tt.ok {
				if got, want := res.Errors, 1; got != want {
					t.Fatalf("errors: got %d, want %d", got, want)
				}
				if msg := res.Messages[0].Message; !strings.Contains(msg, "keyname") {
					t.Fatalf("message %q does not name the keyname", msg)
				}
				absent(t, db, "ipam_subnet", tt.key)
				return
			}
			if got, want := res.Created, 1; got != want {
				t.Fatalf("created: got %d, want %d (%s)", got, want, messages(res))
			}
			instance(t, db, "ipam_subnet", tt.key)
		})
	}
	t.Run("int mode accepts a number and refuses a word", func(t *testing.T) {
		db := newTestDB(t)
		mustLoad(t, db, `{classname: _schema, keyname: vlan, keyname_mode: dataformat int gte_1 lte_4094}`, store.LoadOptions{})
		res := load(t, db, `
- {classname: vlan, keyname: "100"}
- {classname: vlan, keyname: "5000"}
- {classname: vlan, keyname: ten}
`, store.LoadOptions{})
		if got, want := counts(res), "created=1 updated=0 unchanged=0 deleted=0 enabled=0 disabled=0 skipped=0 errors=2"; got != want {
			t.Fatalf("counts: got %s, want %s (%s)", got, want, messages(res))
		}
		instance(t, db, "vlan", "100")
	})
}
