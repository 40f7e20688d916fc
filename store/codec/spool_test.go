package codec_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// spooled receives body with SpoolBody (in a temporary directory) and reads its
// entries back as a load does.
func spooled(t testing.TB, body []byte, max int) ([]*model.Entry, []string, error) {
	t.Helper()
	dir := t.TempDir()
	b, err := codec.SpoolBody("body", bytes.NewReader(body), dir, max)
	if err != nil {
		return nil, nil, err
	}
	defer b.Close()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the spool file is still named in its directory: %v", left)
	}
	var out []*model.Entry
	if err := b.Each(func(e *model.Entry) error { out = append(out, e); return nil }); err != nil {
		t.Fatalf("reading back a checked body: %v", err)
	}
	if b.Entries != len(out) {
		t.Fatalf("Entries %d, read back %d", b.Entries, len(out))
	}
	return out, b.Warnings, nil
}

// FuzzSpoolBody: a body received entry by entry gives what ParseBody gives when it
// holds the body whole — the same entries, warnings, or an error of the same code —
// for garbage, truncated and well-formed bodies alike, and never panics.
func FuzzSpoolBody(f *testing.F) {
	seeds := []string{
		"",
		"- {classname: a, keyname: k}\n- {classname: a, keyname: l}\n",
		"- classname: a\n  keyname: k\n  note: |\n    text\n- classname: a\n  keyn",
		"- classname: a\n  keyname: k\n- classname: a\n  keyname: \"unterminated\n",
		`[{"classname": "a", "keyname": "k"}, {"classname": "a", "keyname": "l"`,
		`[{"classname": "a"}] trailing`,
		`{"classname": "a", "keyname": "k"}`,
		"\xef\xbb\xbf[{\"classname\": \"a\"}]",
		"- {classname: a}\n---\n- {classname: b}\n",
		"- &x {classname: a}\n- *x\n",
		"- classname:a\n  keyname: k\n",
		"# only a comment",
		"  - {classname: a}\n",
		"- {classname: a}\nkey: v\n",
		"[1, 2, {\"classname\": \"a\"}, [3]]",
		"\x00\xff- \x01",
		billionLaughs(),
		// The shapes read without the YAML parser, and their near misses.
		"- classname: a\n  keyname: h0000001\n  port: 80\n  ip: 10.0.0.1\n  n: -12\n\n- classname: a\n  keyname: b\n",
		"- classname: a\n  v: true\n  w: Null\n  x: 0815\n  y: -0\n  z: 1.5\n",
		"- classname: a\n  v: 1.2.\n  w: 1_000\n  x: 12345678901234567890\n  y: e1\n  z: host-1.example.org\n",
		"- classname: a\n  keyname: k\n    deeper: x\n  k2: v # c\n  k3: v \n  k4:\n",
		"- classname: a\r\n  keyname: k\r\n  keyname: l\n  classname: b\n",
		"-  classname: a\n- classname: a\n \tkeyname: k\n- classname: a\n  0k: v\n",
		"[ {\"classname\" : \"a\", \"k\":-0, \"f\": 1.50, \"e\": 1e999, \"big\": 12345678901234567890},\n\t{ } , 3, [1], \"s\", null ]",
		"[{\"classname\": \"a\", \"classname\": \"b\", \"l\": [1, \"x\", true, null], \"m\": {\"n\": 1}, \"esc\": \"a\\u00e9\\n\"}]",
		"[{\"k\": \"\xff\"}, {\"k\": [[1]]}, {\"k\": 1.5e3, \"j\": -1.0E-2}]",
	}
	for _, s := range seeds {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, body []byte, max int) {
		max = max & 7 // 0 (no bound) to 7
		got, gotWarn, gotErr := spooled(t, body, max)
		want, wantWarn, wantErr := codec.ParseBody("body", body, max)
		if store.ErrorCode(gotErr) == model.ETooLarge && store.ErrorCode(wantErr) == model.EInvalid {
			// More entries than allowed, and a syntax error after them: a body received
			// entry by entry is refused as soon as the entry past the bound is read (as
			// documented), a body parsed whole at its syntax error. Both refuse it.
			if _, _, err := spooled(t, body, 0); store.ErrorCode(err) != model.EInvalid {
				t.Fatalf("refused as too many entries, but without a bound it gives %v (whole: %v)", err, wantErr)
			}
			return
		}
		if (gotErr == nil) != (wantErr == nil) || store.ErrorCode(gotErr) != store.ErrorCode(wantErr) {
			t.Fatalf("spooled: %v\nwhole: %v", gotErr, wantErr)
		}
		if gotErr != nil {
			if store.ErrorCode(gotErr) == model.EInternal {
				t.Fatalf("a body's fault reported as internal: %v", gotErr)
			}
			return
		}
		sameEntries(t, "spooled", got, want)
		if fmt.Sprint(gotWarn) != fmt.Sprint(wantWarn) {
			t.Fatalf("warnings: spooled %v, whole %v", gotWarn, wantWarn)
		}
	})
}

// TestSpoolBodyLargeYAMLStreams: a YAML block sequence larger than MaxYAMLBody is
// received item by item (a body parsed whole is bounded to MaxYAMLBody); one that
// does not stream is refused as too large, with the reason.
func TestSpoolBodyLargeYAMLStreams(t *testing.T) {
	var b bytes.Buffer
	n := 0
	for b.Len() <= codec.MaxYAMLBody+1<<20 {
		n++
		fmt.Fprintf(&b, "- classname: srv\n  keyname: k%07d\n  note: %s\n", n, strings.Repeat("x", 8000))
	}
	got, _, err := spooled(t, b.Bytes(), 0)
	if err != nil {
		t.Fatalf("a %d MiB block sequence: %v", b.Len()>>20, err)
	}
	if len(got) != n || got[n-1].Fields["keyname"] != fmt.Sprintf("k%07d", n) || got[n-1].Index != n {
		t.Fatalf("%d entries (last %v), want %d", len(got), got[len(got)-1].Fields, n)
	}
	if _, _, err := spooled(t, b.Bytes(), n-1); store.ErrorCode(err) != model.ETooLarge ||
		!strings.Contains(err.Error(), fmt.Sprintf("more than %d entries", n-1)) {
		t.Fatalf("one entry over the bound: got %v", err)
	}
	// The same with an alias to another item, near the end: parsed whole, too large.
	bad := append(bytes.Clone(b.Bytes()), "- &a {classname: srv, keyname: z1}\n- *a\n"...)
	_, _, err = spooled(t, bad, 0)
	if store.ErrorCode(err) != model.ETooLarge || !strings.Contains(err.Error(), fmt.Sprintf("item %d: ", n+2)) {
		t.Fatalf("a large body that does not stream: got %v", err)
	}
	// Garbage after many good items: refused, naming the item.
	bad = append(bytes.Clone(b.Bytes()), "- classname: srv\n  keyname: [unclosed\n"...)
	if _, _, err = spooled(t, bad, 0); store.ErrorCode(err) != model.ETooLarge || !strings.Contains(err.Error(), fmt.Sprintf("item %d", n+1)) {
		t.Fatalf("a large body with a broken last item: got %v", err)
	}
	// A large JSON body cut short: invalid JSON, as ParseBody says it.
	var js bytes.Buffer
	js.WriteString("[")
	for js.Len() <= codec.MaxYAMLBody+1<<20 {
		js.WriteString(`{"classname": "srv", "keyname": "k"},`)
	}
	_, _, err = spooled(t, js.Bytes(), 0)
	_, _, want := codec.ParseBody("body", js.Bytes(), 0)
	if store.ErrorCode(err) != model.EInvalid || err.Error() != want.Error() {
		t.Fatalf("truncated JSON: got %v, want %v", err, want)
	}
}

// failingReader gives its data, then fails.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, f.err
	}
	return n, err
}

// TestSpoolBodyReadError: a body cut off by its reader (a size limit, a client gone)
// is a BodyReadError wrapping the reader's error, whatever the body held so far.
func TestSpoolBodyReadError(t *testing.T) {
	cut := errors.New("connection reset")
	for _, body := range []string{"- {classname: a, keyname: k}\n- {classname: a", `[{"classname": "a"}, {"cl`, "# comment", ""} {
		_, err := codec.SpoolBody("body", &failingReader{strings.NewReader(body), cut}, t.TempDir(), 0)
		var re *codec.BodyReadError
		if !errors.As(err, &re) || !errors.Is(err, cut) {
			t.Fatalf("%q: got %v, want a BodyReadError wrapping the reader's", body, err)
		}
	}
}
