package celosjs

// The functions of the celos object (the builders of schedules, triggers,
// strategies and services the JavaScript files call) and the readers of
// their arguments, which throw a JavaScript error on a bad one.

import (
	"fmt"
	"math"
	"time"

	"github.com/dop251/goja"

	"github.com/celos-go/celos/schema/cron"
	"github.com/celos-go/celos/schema/workflow"
)

// throw raises a JavaScript Error with msg (it never returns).
func (e *evaluator) throw(format string, args ...any) {
	panic(e.vm.NewGoError(fmt.Errorf(format, args...)))
}

// api is the __celos object the prelude wraps as the global celos. Its
// functions are set in this order, by kind.
func (e *evaluator) api() *goja.Object {
	o := e.vm.NewObject()
	set := func(name string, fn func(goja.FunctionCall) goja.Value) {
		_ = o.Set(name, fn)
	}
	set("defineWorkflow", e.defineWorkflow)
	set("addWorkflow", e.defineWorkflow)
	set("importDefaults", e.importDefaults)
	e.setScheduleBuilders(set)
	e.setTriggerBuilders(set)
	e.setServiceBuilders(set)
	e.setHelpers(set)
	e.setUnsupported(set)
	return o
}

// setter sets one function of the celos object.
type setter func(name string, fn func(goja.FunctionCall) goja.Value)

// setScheduleBuilders sets the schedules and the scheduling strategy.
func (e *evaluator) setScheduleBuilders(set setter) {
	set("hourlySchedule", func(c goja.FunctionCall) goja.Value {
		return e.vm.ToValue(&schedule{workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"}})
	})
	set("minutelySchedule", func(c goja.FunctionCall) goja.Value {
		return e.vm.ToValue(&schedule{workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 * * * * ?", TimeZone: "UTC"}})
	})
	set("cronSchedule", func(c goja.FunctionCall) goja.Value {
		expr := e.str(c.Argument(0), "celos.cronSchedule", "the cron expression")
		if _, err := cron.Parse(expr, time.UTC); err != nil {
			e.throw("Error in cron expression %q: %v", expr, err)
		}
		return e.vm.ToValue(&schedule{workflow.Schedule{Type: workflow.ScheduleCron, Cron: expr, TimeZone: "UTC"}})
	})
	set("dependentSchedule", func(c goja.FunctionCall) goja.Value {
		id := e.workflowID(c.Argument(0), "celos.dependentSchedule")
		return e.vm.ToValue(&schedule{workflow.Schedule{Type: workflow.ScheduleDependent, Workflow: id}})
	})
	set("serialSchedulingStrategy", func(c goja.FunctionCall) goja.Value {
		n := int64(1)
		if a := c.Argument(0); !goja.IsUndefined(a) {
			n = e.integer(a, "celos.serialSchedulingStrategy", "the concurrency")
			if n < 1 {
				e.throw("celos.serialSchedulingStrategy: the concurrency must be at least 1, not %d", n)
			}
		}
		return e.vm.ToValue(&strategy{workflow.Strategy{Type: workflow.StrategySerial, Concurrency: int(n)}})
	})
}

// setTriggerBuilders sets the triggers.
func (e *evaluator) setTriggerBuilders(set setter) {
	set("alwaysTrigger", func(c goja.FunctionCall) goja.Value {
		return e.leaf(workflow.Trigger{Type: workflow.TriggerAlways})
	})
	set("hdfsCheckTrigger", func(c goja.FunctionCall) goja.Value {
		path := e.str(c.Argument(0), "celos.hdfsCheckTrigger", "the path")
		if path == "" {
			e.throw("Undefined path in hdfsCheckTrigger")
		}
		t := workflow.Trigger{Type: workflow.TriggerHDFSCheck, Path: path}
		if fs := c.Argument(1); fs.ToBoolean() {
			t.FS = e.str(fs, "celos.hdfsCheckTrigger", "the file system")
		} else if d := e.global("CELOS_DEFAULT_HDFS"); d != nil {
			t.FS = e.str(d, "celos.hdfsCheckTrigger", "CELOS_DEFAULT_HDFS")
		}
		return e.leaf(t)
	})
	set("successTrigger", func(c goja.FunctionCall) goja.Value {
		id := e.workflowID(c.Argument(0), "celos.successTrigger")
		return e.leaf(workflow.Trigger{Type: workflow.TriggerSuccess, Workflow: id})
	})
	nary := func(kind, name string) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value {
			t := workflow.Trigger{Type: kind, Triggers: []workflow.Trigger{}}
			var subs []*trigger
			for i, a := range c.Arguments {
				sub := e.trigger(a, name, fmt.Sprintf("argument %d", i+1))
				t.Triggers = append(t.Triggers, sub.t)
				subs = append(subs, sub)
			}
			return e.composite(name, t, subs...)
		}
	}
	set("andTrigger", nary(workflow.TriggerAnd, "celos.andTrigger"))
	set("orTrigger", nary(workflow.TriggerOr, "celos.orTrigger"))
	set("notTrigger", func(c goja.FunctionCall) goja.Value {
		if !c.Argument(0).ToBoolean() {
			e.throw("Undefined sub trigger")
		}
		sub := e.trigger(c.Argument(0), "celos.notTrigger", "its argument")
		return e.composite("celos.notTrigger", workflow.Trigger{Type: workflow.TriggerNot, Trigger: &sub.t}, sub)
	})
	set("offsetTrigger", func(c goja.FunctionCall) goja.Value {
		sec := e.integer(c.Argument(0), "celos.offsetTrigger", "the seconds")
		if !c.Argument(1).ToBoolean() {
			e.throw("Undefined trigger")
		}
		sub := e.trigger(c.Argument(1), "celos.offsetTrigger", "the trigger")
		return e.composite("celos.offsetTrigger", workflow.Trigger{Type: workflow.TriggerOffset, Seconds: sec, Trigger: &sub.t}, sub)
	})
	set("delayTrigger", func(c goja.FunctionCall) goja.Value {
		sec := e.integer(c.Argument(0), "celos.delayTrigger", "the seconds")
		if sec < 0 {
			e.throw("celos.delayTrigger: the seconds must not be negative, not %d", sec)
		}
		return e.leaf(workflow.Trigger{Type: workflow.TriggerDelay, Seconds: sec})
	})
}

// setServiceBuilders sets the external service: Oozie, with its
// properties (an object or a function(slotID)) and URL.
func (e *evaluator) setServiceBuilders(set setter) {
	set("oozieExternalService", func(c goja.FunctionCall) goja.Value {
		pos, _ := e.callSite()
		s := &service{props: c.Argument(0), pos: pos}
		if _, ok := goja.AssertFunction(s.props); !ok {
			if o, isObj := s.props.(*goja.Object); !isObj || o == nil {
				e.throw("celos.oozieExternalService: the properties must be an object or a function(slotID), not %s", describe(s.props))
			}
		}
		if u := c.Argument(1); !goja.IsUndefined(u) {
			s.url = e.str(u, "celos.oozieExternalService", "the Oozie URL")
		} else if d := e.global("CELOS_DEFAULT_OOZIE"); d != nil {
			s.url = e.str(d, "celos.oozieExternalService", "CELOS_DEFAULT_OOZIE")
		}
		return e.vm.ToValue(s)
	})
}

// setHelpers sets the helpers Celos offered to workflow files.
func (e *evaluator) setHelpers(set setter) {
	set("hdfsPath", func(c goja.FunctionCall) goja.Value {
		// Outside Celos CI's test mode (HDFS_PREFIX_JS_VAR) it is the identity.
		return e.vm.ToValue(e.str(c.Argument(0), "celos.hdfsPath", "the path"))
	})
	set("isRunningInTestMode", func(c goja.FunctionCall) goja.Value { return e.vm.ToValue(false) })
	set("databaseName", func(c goja.FunctionCall) goja.Value {
		return e.vm.ToValue(e.str(c.Argument(0), "celos.databaseName", "the database"))
	})
	set("mergeProperties", func(c goja.FunctionCall) goja.Value {
		src, dst := c.Argument(0).ToObject(e.vm), c.Argument(1).ToObject(e.vm)
		for _, k := range src.Keys() {
			_ = dst.Set(k, src.Get(k))
		}
		return goja.Undefined()
	})
	set("replaceTimeVariables", func(c goja.FunctionCall) goja.Value {
		s := e.str(c.Argument(0), "celos.replaceTimeVariables", "the string")
		t, err := time.Parse(time.RFC3339Nano, c.Argument(1).String())
		if err != nil {
			e.throw("celos.replaceTimeVariables: the time %q is not ISO 8601: %v", c.Argument(1).String(), err)
		}
		return e.vm.ToValue(Substitute(s, t.UTC()))
	})
}

// setUnsupported sets the functions of Celos that cannot be converted to a
// static workflow: each throws an error that says why.
func (e *evaluator) setUnsupported(set setter) {
	unsupported := func(name, why string) {
		set(name, func(c goja.FunctionCall) goja.Value {
			e.throw("celos.%s cannot be converted: %s", name, why)
			return nil
		})
	}
	unsupported("hdfsCheck", "it reads HDFS while the file is evaluated, and a CUE workflow is static (use celos.hdfsCheckTrigger)")
	unsupported("getRegister", "it reads Celos's registers while the file is evaluated, and a CUE workflow is static")
	unsupported("forEachRegister", "it reads Celos's registers while the file is evaluated, and a CUE workflow is static")
	unsupported("makePropertiesGen", "it is Celos's internal helper of celos.oozieExternalService; pass the properties or the function to that instead")
}

// global is the value of a global variable, nil when it is undefined.
func (e *evaluator) global(name string) goja.Value {
	v := e.vm.GlobalObject().Get(name)
	if v == nil || goja.IsUndefined(v) {
		return nil
	}
	return v
}

func describe(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	if _, ok := goja.AssertFunction(v); ok {
		return "a function"
	}
	switch x := v.Export().(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
	case int64, float64:
		return "the number " + v.String()
	case bool:
		return "a boolean"
	case *schedule:
		return "a schedule"
	case *trigger:
		return "a trigger"
	case *strategy:
		return "a scheduling strategy"
	case *service:
		return "an external service"
	}
	if _, ok := v.(*goja.Object); ok {
		return "an object"
	}
	return v.String()
}

func (e *evaluator) str(v goja.Value, fn, what string) string {
	s, ok := v.Export().(string)
	if !ok || goja.IsUndefined(v) {
		e.throw("%s: %s must be a string, not %s", fn, what, describe(v))
	}
	return s
}

// workflowID reads the id of another workflow.
func (e *evaluator) workflowID(v goja.Value, fn string) string {
	id := e.str(v, fn, "the workflow id")
	if !validID(id) {
		e.throw("%s: %q is not a workflow id (letters, digits, '.', '_' and '-', at most 255 bytes)", fn, id)
	}
	return id
}

// validID is the schema's #ID.
func validID(id string) bool {
	return workflow.IDPattern.MatchString(id) && len(id) <= 255 && id != "." && id != ".."
}

func (e *evaluator) integer(v goja.Value, fn, what string) int64 {
	var f float64
	switch x := v.Export().(type) {
	case int64:
		return x
	case float64:
		f = x
	default:
		e.throw("%s: %s must be a number, not %s", fn, what, describe(v))
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.Abs(f) > 1<<53 {
		e.throw("%s: %s must be a whole number, not %v", fn, what, f)
	}
	return int64(f)
}

func (e *evaluator) trigger(v goja.Value, fn, what string) *trigger {
	t, ok := v.Export().(*trigger)
	if !ok {
		e.throw("%s: %s must be a trigger (celos.*Trigger(...)), not %s", fn, what, describe(v))
	}
	return t
}

// maxTriggerNodes bounds the triggers in one trigger tree. A JavaScript
// file can use one trigger object many times (t = and(t, t)), so a tree
// of a few calls could otherwise stand for billions of triggers, which
// the CUE generator would write out one by one.
const maxTriggerNodes = 10000

// leaf wraps a trigger without nested triggers.
func (e *evaluator) leaf(t workflow.Trigger) goja.Value {
	return e.vm.ToValue(&trigger{t: t, depth: 1, nodes: 1})
}

// composite wraps a trigger made of subs, refusing a tree deeper than
// celos allows (workflow.MaxTriggerDepth) or larger than maxTriggerNodes.
func (e *evaluator) composite(fn string, t workflow.Trigger, subs ...*trigger) goja.Value {
	w := &trigger{t: t, depth: 1, nodes: 1}
	for _, s := range subs {
		w.depth = max(w.depth, s.depth+1)
		w.nodes += s.nodes
	}
	if w.depth > workflow.MaxTriggerDepth {
		e.throw("%s: triggers nest deeper than %d levels (a celos limit)", fn, workflow.MaxTriggerDepth)
	}
	if w.nodes > maxTriggerNodes {
		e.throw("%s: a trigger of more than %d triggers (a celos limit; the same trigger used twice counts twice)", fn, maxTriggerNodes)
	}
	return e.vm.ToValue(w)
}
