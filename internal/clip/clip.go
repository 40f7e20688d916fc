// Package clip bounds the user input that error messages quote: a message that
// echoes a 16 MB CSV header, keyname or rule back to its caller costs memory, log
// space and bandwidth, and hides the point of the message. Every error that quotes
// input goes through it. It imports only the standard library, so every package of
// the service, rules included, may use it.
package clip

import (
	"strconv"
	"unicode/utf8"
)

// Max is how many bytes of quoted text an error message shows of one input at most;
// a longer input is cut there and followed by its full length.
const Max = 150

// Quote is s quoted as %q quotes it, with at most Max bytes between the quotes: a
// longer s is cut at a character boundary and followed by `... (N bytes)`.
func Quote(s string) string {
	if len(s) <= Max/4 { // even fully escaped, it fits
		return strconv.Quote(s)
	}
	buf := make([]byte, 0, Max+32)
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		_, w := utf8.DecodeRuneInString(s[i:])
		piece := strconv.Quote(s[i : i+w])
		piece = piece[1 : len(piece)-1]
		if len(buf)-1+len(piece) > Max {
			buf = append(buf, `"...`...)
			return string(lengthOf(buf, len(s)))
		}
		buf = append(buf, piece...)
		i += w
	}
	return string(append(buf, '"'))
}

// Text is s cut as Quote cuts it, without quotes or escapes: for messages that show
// input as it is, such as a CSV header line.
func Text(s string) string {
	if len(s) <= Max {
		return s
	}
	cut := Max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	buf := make([]byte, 0, cut+32)
	buf = append(buf, s[:cut]...)
	buf = append(buf, "..."...)
	return string(lengthOf(buf, len(s)))
}

func lengthOf(buf []byte, n int) []byte {
	buf = append(buf, " ("...)
	buf = strconv.AppendInt(buf, int64(n), 10)
	return append(buf, " bytes)"...)
}
