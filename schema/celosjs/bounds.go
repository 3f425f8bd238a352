package celosjs

import (
	"fmt"

	"github.com/dop251/goja"
)

// boundStrings replaces String.prototype.repeat, padStart and padEnd with
// functions that refuse, as a RangeError, a result longer than an eighth
// of the memory limit before goja allocates it: goja makes such a string
// in one allocation, which the memory limit (sampled) sees only once it
// is made, and a file would take the machine's memory in one call.
// Strings within the bound are made by the original functions.
func (e *evaluator) boundStrings() error {
	proto := e.vm.Get("String").ToObject(e.vm).Get("prototype").ToObject(e.vm)
	limit := int64(e.opt.MemoryLimit / 8)
	rangeError, ok := goja.AssertConstructor(e.vm.Get("RangeError"))
	if !ok {
		return fmt.Errorf("RangeError is not a constructor")
	}
	for _, name := range []string{"repeat", "padStart", "padEnd"} {
		orig, ok := goja.AssertFunction(proto.Get(name))
		if !ok {
			return fmt.Errorf("String.prototype.%s is not a function", name)
		}
		length := resultLength(name)
		bounded := func(c goja.FunctionCall) goja.Value {
			if !goja.IsUndefined(c.This) && !goja.IsNull(c.This) {
				if n := length(c); n > limit {
					msg := fmt.Sprintf("Invalid string length: %d characters, over import-js's bound of %d (an eighth of the memory limit)", n, limit)
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
		if err := proto.DefineDataProperty(name, fn, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
			return err
		}
	}
	return nil
}

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
