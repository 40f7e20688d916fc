// Package builtin holds the built-in definition files (the init directory) embedded
// in the binary. Bootstrap loads them into an empty database; migrations reload parts.
package builtin

import (
	"embed"
	"io/fs"
)

//go:embed init/*.yml
var files embed.FS

// Init is the init directory: 00_permission.yml and the other built-in .yml files.
func Init() fs.FS {
	sub, err := fs.Sub(files, "init")
	if err != nil {
		panic("builtin: embedded init directory missing: " + err.Error())
	}
	return sub
}
