package schema

import (
	"strings"
	"testing"
)

// TestInvalidModulePath: a cue.mod/module.cue whose module path CUE
// refuses (a leading '_' in an element, which `celos init _x` wrote) is
// an error naming the module file and CUE's reason; before, vet and
// export printed ".: " and nothing else.
func TestInvalidModulePath(t *testing.T) {
	dir := t.TempDir()
	hostileProject(t, dir)
	writeProject(t, dir, map[string]string{"cue.mod/module.cue": "module: \"example.com/_x\"\nlanguage: version: \"v0.17.0\"\n"})
	_, diags, err := Compile(dir)
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, d.String())
	}
	if err != nil {
		msgs = append(msgs, err.Error())
	}
	got := strings.Join(msgs, "\n")
	for _, want := range []string{"module.cue", `module path "example.com/_x" is not valid: leading '_' in path element`} {
		if !strings.Contains(got, want) {
			t.Errorf("want the error to contain %q, got:\n%s", want, got)
		}
	}
}
