package console

import (
	"html/template"
	"strconv"
)

var funcs = template.FuncMap{
	"link": link,
	"num":  thousands,
}

// thousands writes n with a comma between groups of three digits (12,400), as the
// console shows every count.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
