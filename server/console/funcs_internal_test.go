package console

import (
	"math"
	"testing"
)

// TestWords: long words with punctuation are kept whole, short ones and the spaces
// between words are left as they are, and everything is escaped.
func TestWords(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                                   "",
		"par-r01 in  row\n2":                 "par-r01 in  row\n2",
		"10.20.30.40":                        "10.20.30.40",
		"see rack-0123456789abcdef now":      `see <span class="tok">rack-0123456789abcdef</span> now`,
		"abcdefghijklmnopqrstuvwxyz":         "abcdefghijklmnopqrstuvwxyz",
		`<b>"x"&amp;</b>-padding-to-be-long`: `<span class="tok">&lt;b&gt;&#34;x&#34;&amp;amp;&lt;/b&gt;-padding-to-be-long</span>`,
		"<script>alert(1)</script>":          `<span class="tok">&lt;script&gt;alert(1)&lt;/script&gt;</span>`,
		"a <i>":                              "a &lt;i&gt;",
	} {
		if got := string(words(in)); got != want {
			t.Errorf("words(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNum: counts of every integer type the pages show get thousands separators.
func TestNum(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   any
		want string
	}{
		{0, "0"}, {999, "999"}, {1000, "1,000"}, {12400, "12,400"}, {-1234567, "-1,234,567"},
		{int64(3003), "3,003"}, {uint64(4294967294), "4,294,967,294"}, {int64(math.MinInt64), "-9,223,372,036,854,775,808"},
		{"n/a", "n/a"},
	} {
		if got := num(c.in); got != c.want {
			t.Errorf("num(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
