package model

import "sort"

// Dataformats lists the dataformats a field may have, sorted (forms offer them).
func Dataformats() []string {
	out := make([]string, 0, len(dataformats))
	for d := range dataformats {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
