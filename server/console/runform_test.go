package console_test

import (
	"testing"
)

// TestRunFormDryRunDefault: the run form starts with the dry run ticked only for a user
// whose every runnable schema allows only a dry run, and says why; the label is bound
// to its checkbox.
func TestRunFormDryRunDefault(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, 100, nil)
	e.load(pipelinePeople)
	ops := e.browser()
	ops.signIn("ops", "ops-pass-1")
	p := ops.get("/data/private/pipeline/tag/")
	want(t, p, 200, `<label class="check" for="dryrun"><input type="checkbox" name="dryrun" value="true" id="dryrun">`, `id="instance-help"`)
	lacks(t, p, "the only run your permissions allow")
	padmin := e.browser()
	padmin.signIn("padmin", "padmin-pass-1")
	want(t, padmin.get("/data/private/pipeline/tag/"), 200, `id="dryrun" checked`, "the only run your permissions allow on these schemas")
}
