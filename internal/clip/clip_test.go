package clip

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuoteKeepsShortInput(t *testing.T) {
	for _, s := range []string{"", "abc", "tab\there", strings.Repeat("é", Max/4), strings.Repeat("x", Max-2)} {
		if got, want := Quote(s), strconv.Quote(s); got != want {
			t.Fatalf("Quote(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestQuoteBoundsLongInput(t *testing.T) {
	for name, s := range map[string]string{
		"ascii":       strings.Repeat("a", 16<<20),
		"escaped":     strings.Repeat("\x00", 10000),
		"multibyte":   strings.Repeat("日本", 5000),
		"invalid":     strings.Repeat("\xff", 5000),
		"quotes":      strings.Repeat(`"`, 5000),
		"mixed tail":  strings.Repeat("a", Max-1) + "日本語",
		"one too big": strings.Repeat("a", Max+1),
	} {
		t.Run(name, func(t *testing.T) {
			got := Quote(s)
			if len(got) > Max+40 {
				t.Fatalf("Quote of %d bytes is %d bytes long: %.80s", len(s), len(got), got)
			}
			if want := " (" + strconv.Itoa(len(s)) + " bytes)"; !strings.HasSuffix(got, want) {
				t.Fatalf("Quote = %s, want it to end with %q", got, want)
			}
			// The shown part is a valid Go string literal of a prefix of s.
			lit := got[:strings.LastIndex(got, `"...`)+1]
			shown, err := strconv.Unquote(lit)
			if err != nil || !strings.HasPrefix(s, shown) || shown == "" {
				t.Fatalf("shown part %s is not a quoted prefix of the input (%v)", lit, err)
			}
		})
	}
}

func TestTextBoundsLongInput(t *testing.T) {
	if got := Text("short"); got != "short" {
		t.Fatalf("Text(short) = %q", got)
	}
	s := strings.Repeat("a", Max-1) + strings.Repeat("é", 1000)
	got := Text(s)
	if want := "... (" + strconv.Itoa(len(s)) + " bytes)"; len(got) > Max+40 || !utf8.ValidString(got) || !strings.HasSuffix(got, want) {
		t.Fatalf("Text = %q (%d bytes)", got, len(got))
	}
}
