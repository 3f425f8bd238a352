package schema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzEmbed compiles arbitrary single-file projects next to symbolic links
// that leave the module (a file, a directory, a chain, a relative path)
// and one that stays inside: whatever the file says (@embed of a file, a
// glob, a type), the secret outside never appears in the compiled
// document or in a diagnostic.
func FuzzEmbed(f *testing.F) {
	wf := func(embed, expr string) string {
		return "@extern(embed)\n\npackage p\n\n" + embed + "\n\nworkflows: a: {\n\tschedule: {type: \"cron\", cron: \"0 0 * * * ?\"}\n\ttrigger: {type: \"always\"}\n\texternalService: {type: \"command\", command: [\"echo\", " + expr + "]}\n}\n"
	}
	f.Add(wf("_s: _ @embed(file=secret.json)", "_s.pw"))
	f.Add(wf("_s: _ @embed(file=secret.txt, type=text)", "_s"))
	f.Add(wf("_s: _ @embed(glob=data/*.json)", `_s["data/secret.json"].pw`))
	f.Add(wf("_s: _ @embed(glob=*/*, type=text)", `"x"`))
	f.Add(wf("_s: _ @embed(glob=*, type=binary)", `"x"`))
	f.Add(wf("_s: _ @embed(file=chain.json)", "_s.pw"))
	f.Add(wf("_s: _ @embed(file=sub/rel.json)", "_s.pw"))
	f.Add(wf("_s: _ @embed(file=in.json)", "_s.pw"))
	f.Add(wf("_s: _ @embed(file=sub/../secret.json)", "_s.pw"))
	const secret = "TOPSECRET-e5b0"
	f.Fuzz(func(t *testing.T, src string) {
		base := t.TempDir()
		outside := filepath.Join(base, "outside")
		dir := filepath.Join(base, "proj")
		writeProject(t, outside, map[string]string{
			"secret.json":     `{"pw": "` + secret + `"}`,
			"secret.txt":      secret,
			"dir/secret.json": `{"pw": "` + secret + `"}`,
		})
		writeProject(t, dir, map[string]string{
			"p.cue":         src,
			"real/in.json":  `{"pw": "inside"}`,
			"sub/README.md": "x",
		})
		for link, target := range map[string]string{
			"secret.json":    "../outside/secret.json",
			"secret.txt":     filepath.Join(outside, "secret.txt"),
			"data":           filepath.Join(outside, "dir"),
			"chain.json":     "secret.json",
			"sub/rel.json":   "../../outside/secret.json",
			"in.json":        "real/in.json",
			"sub/loop.json":  "loop.json",
			"sub/root":       "/",
			"sub/secret.cue": "../../outside/secret.txt",
		} {
			if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(link))); err != nil {
				t.Fatal(err)
			}
		}
		p, diags, err := Compile(dir)
		for _, d := range diags {
			if strings.Contains(d.String(), secret) {
				t.Fatalf("the secret in a diagnostic: %s", d)
			}
		}
		if err != nil {
			return
		}
		data, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), secret) {
			t.Fatalf("the secret in the compiled document:\n%s", data)
		}
	})
}
