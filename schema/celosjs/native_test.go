package celosjs

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/child"
)

// TestUninterruptibleBuiltins: a built-in function that runs past the
// time or memory limit does not see goja's interrupt (it checks between
// JavaScript instructions only); Options.Abandon is then called with the
// file's error soon after the interrupt, so that the command can end
// instead of running, and allocating, without end. Before, `new
// Array(5e8).fill(0)` grew to 7.6 GB and a generic indexOf over {length:
// 1e15} ran for ever, --timeout or not. Each case runs in a child process
// (bounded in memory and time), since the built-in function's goroutine
// cannot be stopped.
func TestUninterruptibleBuiltins(t *testing.T) {
	tests := []struct {
		name, src string
		opt       Options
		want      string
	}{
		{"time", "var x = 1;\nArray.prototype.indexOf.call({length: 1e15}, 1);\n", Options{Timeout: time.Second},
			`^w\.js: evaluation did not finish within 1s and did not stop: it is in a built-in function that cannot be interrupted$`},
		{"memory", "var a = new Array(5e8);\na.fill(0);\n", Options{Timeout: time.Minute, MemoryLimit: 256 << 20},
			`^w\.js: evaluation used more than 256 MiB of memory and did not stop: it is in a built-in function that cannot be interrupted$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child.Run(t, 2*time.Minute, 8<<30, func() error {
				return wantAbandoned(tt.src, tt.opt, regexp.MustCompile(tt.want), 30*time.Second)
			})
		})
	}
}

// TestStringBound: a string built by one call of repeat, padStart or
// padEnd longer than an eighth of the memory limit is a RangeError at its
// line, before it is allocated (goja makes it in one allocation, which the
// memory limit, sampled, saw only once it was made: "ab".repeat(5e8)
// took 1.6 GB against a limit of 1 GiB). Shorter strings are made as
// before.
func TestStringBound(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"repeat", `var s = "ab".repeat(5e8);`, `w.js:1:20: RangeError: Invalid string length: 1000000000 characters, over import-js's bound of 33554432 (an eighth of the memory limit)`},
		{"padStart", `var s = "ab".padStart(1e9, "xy");`, `w.js:1:22: RangeError: Invalid string length: 1000000000 characters, over import-js's bound of 33554432 (an eighth of the memory limit)`},
		{"padEnd", `var s = String.prototype.padEnd.call(7, 1e9);`, `w.js:1:37: RangeError: Invalid string length: 1000000000 characters, over import-js's bound of 33554432 (an eighth of the memory limit)`},
		{"small", `if ("ab".repeat(3) + "7".padStart(3, "0") + "x".padEnd(2, "-") !== "ababab007x-") { throw "wrong"; }`, ``},
		{"null this", `String.prototype.repeat.call(null, 2);`, `w.js:1:29: TypeError: Value is not object coercible`},
		{"negative", `"a".repeat(-1);`, `w.js:1:11: RangeError: Invalid count value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			if err := os.WriteFile("w.js", []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			res := Evaluate([]string{"w.js"}, Options{Timeout: time.Minute, MemoryLimit: 256 << 20})
			want := []string{}
			if tt.want != "" {
				want = []string{tt.want}
			}
			if d := cmp.Diff(want, strs(res.Problems)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestDeepNesting: source nested so deeply that goja's parser (or
// JSON.parse, eval, new Function) recurses until Go's stack limit (1 GB)
// ends the process with "fatal error: stack overflow" is stopped when
// the stack passes MaxStack: Options.Abandon is told, naming the file.
// Brackets are not the only way: a chain of unary operators or of
// assignments nests as deeply. Each case runs in a child process.
func TestDeepNesting(t *testing.T) {
	deep := func(open, mid, close string) string {
		return strings.Repeat(open, 3e6) + mid + strings.Repeat(close, 3e6)
	}
	tests := []struct{ name, src string }{
		{"parentheses", "var x = " + deep("(", "1", ")") + ";\n"},
		{"arrays", "var x = " + deep("[", "", "]") + ";\n"},
		{"unary", "var x = " + deep("!", "1", "") + ";\n"},
		{"assignments", "var x; x = " + deep("x = ", "1", "") + ";\n"},
		{"JSON.parse", `var x = JSON.parse("[".repeat(3e6) + "]".repeat(3e6));` + "\n"},
		{"eval", `var x = eval("(".repeat(3e6) + "1" + ")".repeat(3e6));` + "\n"},
		{"new Function", `var f = new Function("return " + "(".repeat(3e6) + "1" + ")".repeat(3e6));` + "\n"},
	}
	want := regexp.MustCompile(`^w\.js: the evaluation nests too deeply: its stack grew past 64 MiB \(brackets, operators or calls nested some hundred thousand levels deep\)$`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child.Run(t, 2*time.Minute, 8<<30, func() error {
				return wantAbandoned(tt.src, Options{Timeout: time.Minute}, want, 50*time.Second)
			})
		})
	}
}

// TestNormalNesting: nesting as deep as people write, and calls as deep
// as the call depth allows through a native function, are evaluated
// within MaxStack.
func TestNormalNesting(t *testing.T) {
	res := evalSrc(t, "var x = "+strings.Repeat("[", 1000)+strings.Repeat("]", 1000)+";\nvar y = JSON.parse(\"[\".repeat(1000) + \"]\".repeat(1000));\n"+
		"function f(n) { return n === 0 ? 0 : [n].map(function (m) { return f(m - 1); })[0]; }\nf(3000);\n")
	if len(res.Problems) > 0 {
		t.Errorf("nesting 1,000 deep: %v", res.Problems)
	}
}

// TestBufferBound: an ArrayBuffer or typed array larger than an eighth of
// the memory limit is a RangeError at its line, before it is allocated,
// and so is an array that Array.prototype.map or sort, Function.prototype.
// apply, Reflect.apply or Reflect.construct would allocate for the length
// of an array or array-like, as JSON.stringify does for a replacer array
// (new Array(4294967295).map(f) and
// Math.max.apply(null, {length: 4e9}) were "fatal error: runtime: out of
// memory" too).
// Before, new ArrayBuffer(1e11) ended import-js with "fatal error:
// runtime: out of memory" (an allocation Go cannot make is a crash, not
// an error), and new Uint8Array(4e9) took 4 GB of address space
// unnoticed. Smaller buffers and views behave as before. The cases that
// crashed run in a child process.
func TestBufferBound(t *testing.T) {
	const bound = "over import-js's bound of 33554432 bytes (an eighth of the memory limit)"
	tests := []struct {
		name, src, want string
	}{
		{"ArrayBuffer", `var b = new ArrayBuffer(1e11);`, `w.js:1:9: RangeError: Array buffer allocation failed: 100000000000 bytes, ` + bound},
		{"Float64Array", `var b = new Float64Array(2e10);`, `w.js:1:9: RangeError: Array buffer allocation failed: 160000000000 bytes, ` + bound},
		{"from an array-like", `var b = new Int32Array({length: 1e10});`, `w.js:1:9: RangeError: Array buffer allocation failed: 40000000000 bytes, ` + bound},
		{"Uint8Array.from", `var b = Uint8Array.from({length: 1e11});`, `w.js:1:24: RangeError: Array buffer allocation failed: 100000000000 bytes, ` + bound},
		{"map", "var a = new Array(4294967295);\nvar b = a.map(function (x) { return x; });", `w.js:2:14: RangeError: Invalid array length: 4294967295 elements, over import-js's bound of 2097152 (an eighth of the memory limit, 16 bytes an element)`},
		{"sort", `var b = Array.prototype.sort.call({length: 4e9});`, `w.js:1:34: RangeError: Invalid array length: 4000000000 elements, over import-js's bound of 2097152 (an eighth of the memory limit, 16 bytes an element)`},
		{"apply", `var m = Math.max.apply(null, {length: 4e9});`, `w.js:1:23: RangeError: Invalid array length: 4000000000 elements, over import-js's bound of 2097152 (an eighth of the memory limit, 16 bytes an element)`},
		{"Reflect.apply", `var m = Reflect.apply(Math.max, null, {length: 4e9});`, `w.js:1:22: RangeError: Invalid array length: 4000000000 elements, over import-js's bound of 2097152 (an eighth of the memory limit, 16 bytes an element)`},
		{"Reflect.construct", `var m = Reflect.construct(Array, {length: 4e9});`, `w.js:1:26: RangeError: Invalid array length: 4000000000 elements, over import-js's bound of 2097152 (an eighth of the memory limit, 16 bytes an element)`},
		{"JSON.stringify replacer", `var j = JSON.stringify({}, new Array(4294967295));`, `w.js:1:23: RangeError: Invalid array length: 4294967295 elements, over import-js's bound of 2097152 (an eighth of the memory limit, 16 bytes an element)`},
		{"small", `if (JSON.stringify({a: 1, b: 2}, ["a"]) !== '{"a":1}' || JSON.stringify({a: 1}, null, 2).length !== 12) { throw "wrong stringify"; }
if (Math.max.apply(null, [1, 3, 2]) !== 3 || Reflect.apply(Math.min, null, [4, 2]) !== 2 || Reflect.construct(Array, [1, 2]).length !== 2 || Math.max.apply(null) !== -Infinity) { throw "wrong apply"; }
var s = [3, 1, 2].sort().map(function (x) { return x * 2; }); if (s.join() !== "2,4,6") { throw "wrong sort or map"; }
var b = new Float64Array(new ArrayBuffer(16)); var c = new Uint8Array([1, 2, 3]); var d = Uint8Array.from([4]);
if (b.length !== 2 || c.length !== 3 || d[0] !== 4 || !(c instanceof Uint8Array) || !(b.buffer instanceof ArrayBuffer) || Object.getPrototypeOf(c) !== Uint8Array.prototype) { throw "wrong"; }`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child.Run(t, 2*time.Minute, 16<<30, func() error {
				cleanup, err := intoNewDir(tt.src)
				if err != nil {
					return err
				}
				defer cleanup()
				res := Evaluate([]string{"w.js"}, Options{Timeout: time.Minute, MemoryLimit: 256 << 20})
				want := []string{}
				if tt.want != "" {
					want = []string{tt.want}
				}
				if d := cmp.Diff(want, strs(res.Problems)); d != "" {
					return fmt.Errorf("(-want +got):\n%s", d)
				}
				return nil
			})
		})
	}
}

// wantAbandoned evaluates src as w.js in a new directory (the process's
// working directory: run it in a child) with opt, and returns an error
// unless Options.Abandon is called within limit with an error matching
// want (Evaluate returning first is an error too).
func wantAbandoned(src string, opt Options, want *regexp.Regexp, limit time.Duration) error {
	cleanup, err := intoNewDir(src)
	if err != nil {
		return err
	}
	defer cleanup()
	abandoned := make(chan error, 1)
	opt.Abandon = func(err error) { abandoned <- err }
	returned := make(chan *Result, 1)
	go func() { returned <- Evaluate([]string{"w.js"}, opt) }()
	select {
	case err := <-abandoned:
		if !want.MatchString(err.Error()) {
			return fmt.Errorf("Abandon(%q), want %s", err, want)
		}
		return nil
	case res := <-returned:
		return fmt.Errorf("Evaluate returned (%q) without Abandon: the evaluation stopped by itself", strs(res.Problems))
	case <-time.After(limit):
		return fmt.Errorf("Abandon was not called within %v of starting (limit: %s, %d MiB)", limit, opt.Timeout, opt.MemoryLimit>>20)
	}
}

// intoNewDir makes a new directory holding w.js (src) the process's
// working directory (run it in a child); cleanup removes it.
func intoNewDir(src string) (cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "celosjs")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(dir+"/w.js", []byte(src), 0o644); err == nil {
		err = os.Chdir(dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return func() { os.RemoveAll(dir) }, nil
}
