// The limits an evaluation runs under: time, heap, stack, and the length
// of a string one call may make.

package celosjs

import (
	"fmt"
	"runtime/metrics"
	"time"

	"github.com/dop251/goja"
)

// guard runs fn with the time and memory limits, turning JavaScript
// errors into *Error. goja sees an interrupt between JavaScript
// instructions only: when fn has not returned StopGrace after it, it is in
// a built-in function that will not stop, and opt.Abandon is told.
func (e *evaluator) guard(name string, fn func() error) error {
	done := make(chan struct{})
	go e.watch(name, done)
	defer func() {
		close(done)
		e.vm.ClearInterrupt()
	}()
	return jsError(name, fn(), e.opt)
}

// MaxStack bounds the goroutine stacks of the process while a file is
// evaluated: goja's parser, JSON.parse and native functions recurse in Go
// as deeply as the source nests, and Go's own limit (1 GB) is a crash.
// Past it Options.Abandon is told at once: a stack doubles as it grows,
// and the copy past 512 MiB is already fatal. Nesting 1,000 deep and
// 3,000 nested calls through Array.prototype.map (9,000 frames) stay well within it.
const MaxStack = 64 << 20

// StopGrace is how long an interrupted evaluation may take to stop before
// Options.Abandon is called.
const StopGrace = 500 * time.Millisecond

// watch interrupts the evaluation of the file name when it runs past the
// time limit or the heap grows past the memory limit (a loop that fills
// an array would otherwise take the machine's memory before the time
// limit), until done is closed.
func (e *evaluator) watch(name string, done <-chan struct{}) {
	deadline := time.NewTimer(e.opt.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	var reason error
	var grace <-chan time.Time
	stop := func(why error) {
		if reason == nil {
			reason = why
			e.vm.Interrupt(why)
			grace = time.After(StopGrace)
		}
	}
	for {
		select {
		case <-done:
			return
		case <-deadline.C:
			stop(errTimeout)
		case <-tick.C:
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > e.opt.MemoryLimit {
				stop(errMemory)
			}
			// Go's stack limit (1 GB) ends the process, it cannot be
			// recovered from: there is no waiting for an interrupt.
			if sample[1].Value.Kind() == metrics.KindUint64 && sample[1].Value.Uint64() > MaxStack {
				e.vm.Interrupt(errStack)
				if e.opt.Abandon != nil {
					e.opt.Abandon(&Error{Pos{File: name}, limitMessage(errStack, e.opt)})
				}
				return
			}
		case <-grace:
			if e.opt.Abandon != nil {
				e.opt.Abandon(&Error{Pos{File: name}, limitMessage(reason, e.opt) + " and did not stop: it is in a built-in function that cannot be interrupted"})
			}
			return
		}
	}
}

// limitMessage says which limit an evaluation ran past.
func limitMessage(reason error, opt Options) string {
	switch reason {
	case errMemory:
		return fmt.Sprintf("evaluation used more than %d MiB of memory", opt.MemoryLimit>>20)
	case errStack:
		return fmt.Sprintf("the evaluation nests too deeply: its stack grew past %d MiB (brackets, operators or calls nested some hundred thousand levels deep)", MaxStack>>20)
	}
	return fmt.Sprintf("evaluation did not finish within %s", opt.Timeout)
}

// boundAllocations bounds the built-in functions that allocate at once
// what their arguments ask for: strings, arrays and buffers.
func (e *evaluator) boundAllocations() error {
	for _, b := range []func() error{e.boundStrings, e.boundArrays, e.boundBuffers} {
		if err := b(); err != nil {
			return err
		}
	}
	return nil
}

// boundStrings replaces String.prototype.repeat, padStart and padEnd with
// functions that refuse, as a RangeError, a result longer than an eighth
// of the memory limit before goja allocates it: goja makes such a string
// in one allocation, which the memory limit (sampled) sees only once it
// is made, and a file would take the machine's memory in one call.
// Strings within the bound are made by the original functions.
func (e *evaluator) boundStrings() error {
	limit := int64(e.opt.MemoryLimit / 8)
	stringProto := e.vm.Get("String").ToObject(e.vm).Get("prototype").ToObject(e.vm)
	for _, name := range []string{"repeat", "padStart", "padEnd"} {
		length := resultLength(name)
		err := e.bound(stringProto, "String.prototype", name, func(c goja.FunctionCall) string {
			if n := length(c); n > limit {
				return fmt.Sprintf("Invalid string length: %d characters, over import-js's bound of %d (an eighth of the memory limit)", n, limit)
			}
			return ""
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// valueSize is the size of an element of a goja array (an interface).
const valueSize = 16

// boundArrays replaces the functions that allocate an array of a length
// they are given before they look at its elements (Array.prototype.map
// and sort: the length of this; Function.prototype.apply, Reflect.apply
// and Reflect.construct: of the arguments; JSON.stringify: of a replacer
// array) with functions that refuse,
// as a RangeError, a length of more than an eighth of the memory limit:
// new Array(4294967295).map(f) and Math.max.apply(null, {length: 4e9})
// asked Go for 64 GB at once ("fatal error: runtime: out of memory").
// The other functions of an array grow what they make as they go, and
// are bounded by the time and memory limits.
func (e *evaluator) boundArrays() error {
	limit := int64(e.opt.MemoryLimit / 8 / valueSize)
	tooLong := func(v goja.Value) string {
		o, ok := v.(*goja.Object)
		if !ok || o == nil {
			return ""
		}
		n := o.Get("length")
		if n == nil {
			return ""
		}
		if l := n.ToNumber().ToFloat(); l > float64(limit) {
			return fmt.Sprintf("Invalid array length: %.0f elements, over import-js's bound of %d (an eighth of the memory limit, %d bytes an element)", l, limit, valueSize)
		}
		return ""
	}
	arrayProto := e.vm.Get("Array").ToObject(e.vm).Get("prototype").ToObject(e.vm)
	functionProto := e.vm.Get("Function").ToObject(e.vm).Get("prototype").ToObject(e.vm)
	reflect := e.vm.Get("Reflect").ToObject(e.vm)
	json := e.vm.Get("JSON").ToObject(e.vm)
	for _, b := range []struct {
		obj    *goja.Object
		where  string
		name   string
		refuse func(c goja.FunctionCall) string
	}{
		{arrayProto, "Array.prototype", "map", func(c goja.FunctionCall) string { return tooLong(c.This.ToObject(e.vm)) }},
		{arrayProto, "Array.prototype", "sort", func(c goja.FunctionCall) string { return tooLong(c.This.ToObject(e.vm)) }},
		{functionProto, "Function.prototype", "apply", func(c goja.FunctionCall) string { return tooLong(c.Argument(1)) }},
		{reflect, "Reflect", "apply", func(c goja.FunctionCall) string { return tooLong(c.Argument(2)) }},
		{reflect, "Reflect", "construct", func(c goja.FunctionCall) string { return tooLong(c.Argument(1)) }},
		{json, "JSON", "stringify", func(c goja.FunctionCall) string { return tooLong(c.Argument(1)) }},
	} {
		if err := e.bound(b.obj, b.where, b.name, b.refuse); err != nil {
			return err
		}
	}
	return nil
}

// bound replaces the function name of obj (where names obj in errors)
// with one that throws a RangeError with the message refuse returns,
// unless it returns "", and otherwise calls the original. The this of a
// call on null or undefined is left to the original (its TypeError).
func (e *evaluator) bound(obj *goja.Object, where, name string, refuse func(c goja.FunctionCall) string) error {
	rangeError, ok := goja.AssertConstructor(e.vm.Get("RangeError"))
	if !ok {
		return fmt.Errorf("RangeError is not a constructor")
	}
	orig, ok := goja.AssertFunction(obj.Get(name))
	if !ok {
		return fmt.Errorf("%s.%s is not a function", where, name)
	}
	bounded := func(c goja.FunctionCall) goja.Value {
		if !goja.IsUndefined(c.This) && !goja.IsNull(c.This) {
			if msg := refuse(c); msg != "" {
				ex, err := rangeError(nil, e.vm.ToValue(msg))
				if err != nil {
					panic(err)
				}
				panic(ex)
			}
		}
		v, err := orig(c.This, c.Arguments...)
		if err != nil {
			panic(err)
		}
		return v
	}
	fn := e.vm.ToValue(bounded).ToObject(e.vm)
	_ = fn.DefineDataProperty("name", e.vm.ToValue(name), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	return obj.DefineDataProperty(name, fn, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
}

// boundBuffers replaces ArrayBuffer and the typed array constructors
// with functions that refuse, as a RangeError, a buffer of more than an
// eighth of the memory limit before it is allocated: Go cannot recover
// from an allocation the system refuses (new ArrayBuffer(1e11) was
// "fatal error: runtime: out of memory"), and one it makes is past the
// sampled memory limit before the sample. A typed array made from an
// array-like is bounded by its length; one made on a buffer allocates
// nothing. Everything else (the prototype, so instanceof, and the static
// functions from, of, isView) is the original constructor's.
func (e *evaluator) boundBuffers() error {
	_, err := e.vm.RunScript(preludeName, fmt.Sprintf(boundBuffersJS, e.opt.MemoryLimit/8))
	return err
}

const boundBuffersJS = `(function (global, limit) {
	"use strict";
	var isBuffer = function (a) { var t = Object.prototype.toString.call(a); return t === "[object ArrayBuffer]" || t === "[object SharedArrayBuffer]"; };
	var guard = function (name, bytes) {
		var C = global[name];
		if (typeof C !== "function") { return; }
		var W = function () {
			if (new.target === undefined) { return C.apply(this, arguments); }
			var a = arguments[0], n = 0;
			if (typeof a === "number") {
				n = a;
			} else if (bytes > 0 && a !== null && typeof a === "object" && !isBuffer(a)) {
				n = Number(a.length);
			}
			n = n * Math.abs(bytes);
			if (n > limit) {
				throw new RangeError("Array buffer allocation failed: " + n + " bytes, over import-js's bound of " + limit + " bytes (an eighth of the memory limit)");
			}
			return Reflect.construct(C, arguments, new.target === W ? C : new.target);
		};
		Object.setPrototypeOf(W, Object.getPrototypeOf(C));
		Object.getOwnPropertyNames(C).forEach(function (k) {
			if (k !== "arguments" && k !== "caller") { Object.defineProperty(W, k, Object.getOwnPropertyDescriptor(C, k)); }
		});
		Object.defineProperty(C.prototype, "constructor", { value: W, writable: true, configurable: true, enumerable: false });
		var P = W;
		Object.defineProperty(global, name, { value: P, writable: true, configurable: true, enumerable: false });
	};
	guard("ArrayBuffer", -1);
	guard("SharedArrayBuffer", -1);
	[["Int8Array", 1], ["Uint8Array", 1], ["Uint8ClampedArray", 1], ["Int16Array", 2], ["Uint16Array", 2],
	 ["Int32Array", 4], ["Uint32Array", 4], ["Float32Array", 4], ["Float64Array", 8], ["BigInt64Array", 8], ["BigUint64Array", 8]]
		.forEach(function (t) { guard(t[0], t[1]); });
})(this, %d);
`

// resultLength returns the length of the string the call of the
// String.prototype function name would make, at least (in UTF-8 bytes of
// the string called on: never fewer than its UTF-16 units).
func resultLength(name string) func(c goja.FunctionCall) int64 {
	if name == "repeat" {
		return func(c goja.FunctionCall) int64 {
			n := c.Argument(0).ToNumber().ToFloat()
			s := float64(len(c.This.String()))
			if n <= 0 || s == 0 || n != n {
				return 0
			}
			if s*n > 1<<62 {
				return 1 << 62
			}
			return int64(s * n)
		}
	}
	return func(c goja.FunctionCall) int64 {
		n := c.Argument(0).ToNumber().ToFloat()
		if n != n || n <= 0 {
			return 0
		}
		if n > 1<<62 {
			return 1 << 62
		}
		return int64(n)
	}
}
