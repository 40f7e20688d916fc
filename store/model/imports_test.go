package model_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsNoSQL holds the seam under the store: the model and the codecs reach no
// database/sql (not even through a dependency) and nothing of ours but the rule
// language, the clipping helpers and the model itself.
func TestImportsNoSQL(t *testing.T) {
	allowed := map[string]bool{"dataservice/rules": true, "dataservice/internal/clip": true,
		"dataservice/store/model": true, "dataservice/store/codec": true}
	for _, pkg := range []string{"dataservice/store/model", "dataservice/store/codec"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "database/sql" || strings.HasPrefix(dep, "database/sql/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
			if (dep == "dataservice" || strings.HasPrefix(dep, "dataservice/")) && !allowed[dep] {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
