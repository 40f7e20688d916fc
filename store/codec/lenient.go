package codec

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

var (
	yamlErrLine = regexp.MustCompile(`line (\d+):`)
	// missingSpace is a mapping line "key:value" without the space YAML needs after ':'.
	missingSpace = regexp.MustCompile(`^(\s*(?:- )?[A-Za-z_][A-Za-z0-9_]*):([^\s/:].*)$`)
)

// maxRepairs bounds the lines ParseDocumentLenient repairs in one document.
const maxRepairs = 20

// ParseDocumentLenient is ParseDocument for files written by people: when the YAML does
// not parse because a mapping line lacks the space after its colon ("description:Some
// text", as in the reference application's demo files), that line is read as
// "description: Some text" and a warning says so. Anything else fails as ParseDocument does.
func ParseDocumentLenient(name string, data []byte) ([]*model.Entry, []string, error) {
	entries, err := ParseDocument(name, data)
	if err == nil {
		return entries, nil, nil
	}
	first := err
	var warnings []string
	lines := bytes.Split(data, []byte("\n"))
	for i := 0; i < maxRepairs; i++ {
		m := yamlErrLine.FindStringSubmatch(err.Error())
		if m == nil {
			return nil, nil, first
		}
		n, _ := strconv.Atoi(m[1])
		fixed := false
		// The parser reports the bad line itself or the line after it.
		for _, at := range []int{n - 1, n - 2} {
			if at < 0 || at >= len(lines) {
				continue
			}
			line := bytes.TrimRight(lines[at], "\r")
			if sm := missingSpace.FindSubmatch(line); sm != nil {
				lines[at] = []byte(string(sm[1]) + ": " + string(sm[2]))
				// The warning names the key, never the value: the value may be a plain
				// secret (a "password:..." line), and warnings reach replies and logs.
				key := strings.TrimPrefix(strings.TrimSpace(string(sm[1])), "- ")
				warnings = append(warnings, fmt.Sprintf("%s: line %d: no space after ':' after key %s; read as if there were one",
					name, at+1, clip.Quote(key)))
				fixed = true
				break
			}
		}
		if !fixed {
			return nil, nil, first
		}
		if entries, err = ParseDocument(name, bytes.Join(lines, []byte("\n"))); err == nil {
			return entries, warnings, nil
		}
	}
	return nil, nil, first
}
