package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// doc is openapi.json, parsed.
type doc map[string]any

func loadDoc(t testing.TB) doc {
	t.Helper()
	var d doc
	if err := json.Unmarshal(openapiJSON, &d); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return d
}

// resolve follows a local $ref ("#/components/...").
func (d doc) resolve(v any) map[string]any {
	m, _ := v.(map[string]any)
	for m != nil {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var cur any = map[string]any(d)
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cur = cur.(map[string]any)[part]
		}
		m, _ = cur.(map[string]any)
	}
	return m
}

// operation returns the documented operation for path and method, or nil.
func (d doc) operation(path, method string) map[string]any {
	p, _ := d["paths"].(map[string]any)[path].(map[string]any)
	if p == nil {
		return nil
	}
	op, _ := p[strings.ToLower(method)].(map[string]any)
	return op
}

// TestOpenAPIMatchesRoutes walks the handler's route table and checks that
// every route, method and parameter is documented (with the same required
// flag), and that the document describes nothing the handler lacks.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	d := loadDoc(t)
	if v := d["openapi"]; v != "3.1.0" {
		t.Errorf("openapi version %v", v)
	}
	h := New(newFake(), Options{})
	documented := map[string]bool{}
	for path, item := range d["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, rt := range h.routes {
		for method, ep := range rt.methods {
			key := method + " " + rt.path
			served[key] = true
			op := d.operation(rt.path, method)
			if op == nil {
				t.Errorf("%s is served but not in openapi.json", key)
				continue
			}
			want := map[string]bool{}
			for _, p := range ep.params {
				want[p.name] = p.required
			}
			got := map[string]bool{}
			ps, _ := op["parameters"].([]any)
			for _, raw := range ps {
				p := d.resolve(raw)
				if p["in"] != "query" {
					t.Errorf("%s: parameter %v is in %v, want query", key, p["name"], p["in"])
				}
				name := p["name"].(string)
				if _, dup := got[name]; dup {
					t.Errorf("%s: parameter %s documented twice", key, name)
				}
				req, _ := p["required"].(bool)
				got[name] = req
				if d.resolve(p["schema"]) == nil {
					t.Errorf("%s: parameter %s has no schema", key, name)
				}
			}
			if fmt.Sprint(sortedMap(got)) != fmt.Sprint(sortedMap(want)) {
				t.Errorf("%s: documented parameters (name:required) %v, handler reads %v", key, sortedMap(got), sortedMap(want))
			}
			if _, hasBody := op["requestBody"]; hasBody != ep.body {
				t.Errorf("%s: requestBody documented %v, handler reads a body %v", key, hasBody, ep.body)
			}
			resp, _ := op["responses"].(map[string]any)
			if _, ok := resp["200"]; !ok {
				t.Errorf("%s: no 200 response documented", key)
			}
			// Requests that change state need the bearer token when the
			// server has one (--auth-token-file); reads never do.
			_, has401 := resp["401"]
			_, hasSec := op["security"]
			if changes := method != http.MethodGet; has401 != changes || hasSec != changes {
				t.Errorf("%s: 401 documented %v, security documented %v; want both %v", key, has401, hasSec, changes)
			}
			// A server without a token refuses a foreign Host on every
			// path (DNS rebinding, scheduler/server).
			if _, ok := resp["421"]; !ok {
				t.Errorf("%s: no 421 documented", key)
			}
			if len(ep.params) > 0 {
				if _, ok := resp["400"]; !ok {
					t.Errorf("%s: takes parameters but documents no 400", key)
				}
			}
		}
	}
	for key := range documented {
		if !served[key] {
			t.Errorf("%s is in openapi.json but not served", key)
		}
	}
}

func sortedMap(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+":"+strconv.FormatBool(v))
	}
	sort.Strings(out)
	return out
}

// checkResponse validates an answer against the documented response for
// its path, method and status: the status must be documented (405 and
// unknown paths are answered for any path) and a JSON body must match the
// schema.
func checkResponse(t testing.TB, d doc, method, path string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if method == http.MethodHead && d.operation(path, method) == nil {
		method = http.MethodGet // HEAD is answered as GET (TestHeadOfGetRoutes)
	}
	op := d.operation(path, method)
	if op == nil || rec.Code == http.StatusMethodNotAllowed {
		checkErrorBody(t, rec)
		return
	}
	resp := d.resolve(op["responses"].(map[string]any)[strconv.Itoa(rec.Code)])
	if resp == nil && rec.Code == http.StatusInternalServerError {
		checkErrorBody(t, rec) // any endpoint may fail on the server's side
		return
	}
	if resp == nil {
		t.Errorf("%s %s answered %d, which openapi.json does not document (body %s)", method, path, rec.Code, rec.Body)
		return
	}
	content, _ := resp["content"].(map[string]any)
	ct := rec.Header().Get("Content-Type")
	mt := strings.TrimSpace(strings.SplitN(ct, ";", 2)[0])
	media, ok := content[mt].(map[string]any)
	if !ok {
		t.Errorf("%s %s %d: content type %q not documented", method, path, rec.Code, ct)
		return
	}
	if mt != "application/json" {
		return
	}
	var body any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Errorf("%s %s %d: body is not JSON: %v", method, path, rec.Code, err)
		return
	}
	if err := d.validate(d.resolve(media["schema"]), body, "$"); err != nil {
		t.Errorf("%s %s %d: body does not match openapi.json: %v\n%s", method, path, rec.Code, err, rec.Body)
	}
	if rec.Code >= 400 {
		checkServerTime(t, body, rec)
	}
}

// checkErrorBody validates an error answer against the Error schema
// (strict: no field it does not document, code one of its enum) and
// checks that serverTime comes with code not_due and only with it.
func checkErrorBody(t testing.TB, rec *httptest.ResponseRecorder) {
	t.Helper()
	d := loadDoc(t)
	var e map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Errorf("error answer %d is not JSON: %v: %s", rec.Code, err, rec.Body)
		return
	}
	if err := d.validate(map[string]any{"$ref": "#/components/schemas/Error"}, e, "$"); err != nil {
		t.Errorf("error answer %d does not match the Error schema of openapi.json: %v\n%s", rec.Code, err, rec.Body)
	}
	checkServerTime(t, e, rec)
}

// checkServerTime: an error answer has serverTime exactly when its code is
// not_due (the schema cannot say so).
func checkServerTime(t testing.TB, body any, rec *httptest.ResponseRecorder) {
	t.Helper()
	e, ok := body.(map[string]any)
	if !ok || e["error"] == nil {
		return
	}
	if _, has := e["serverTime"]; has != (e["code"] == "not_due") {
		t.Errorf("error answer %d: serverTime present %v with code %v; want it with not_due only: %s", rec.Code, has, e["code"], rec.Body)
	}
}

// TestErrorCodesDocumented: the codes the handler answers (errorKinds and
// its own refusals) are exactly the enum of the Error schema, and the
// schema's description names each.
func TestErrorCodesDocumented(t *testing.T) {
	d := loadDoc(t)
	code := d.resolve(map[string]any{"$ref": "#/components/schemas/Error"})["properties"].(map[string]any)["code"].(map[string]any)
	var enum []string
	for _, v := range code["enum"].([]any) {
		enum = append(enum, v.(string))
	}
	sort.Strings(enum)
	if diff := cmp.Diff(errorCodes(), enum); diff != "" {
		t.Errorf("codes answered (-) vs documented in the Error schema's enum (+):\n%s", diff)
	}
	desc, _ := code["description"].(string)
	for _, c := range errorCodes() {
		if !strings.Contains(desc, c+" (") {
			t.Errorf("the description of code does not explain %s", c)
		}
	}
}

// TestErrorAnswerOfAnUnclassifiedError: an error no row of errorKinds
// matches is the server's fault: 500, code internal, and a text that says
// so without the error's own (which may name the state database's files:
// the log has it).
func TestErrorAnswerOfAnUnclassifiedError(t *testing.T) {
	status, body := errorAnswer(fmt.Errorf("write slot /var/lib/celos/state/wf/x: %w", errors.New("disk full")))
	if status != http.StatusInternalServerError || body.Code != "internal" || strings.Contains(body.Error, "disk full") ||
		strings.Contains(body.Error, "/var/lib") || !strings.Contains(body.Error, "internal error") {
		t.Errorf("status %d, body %+v; want 500, code internal, a generic text", status, body)
	}
}

// validate checks v against the subset of JSON Schema openapi.json uses:
// $ref, type (also a list, with "null"), properties, required,
// additionalProperties false, items, enum.
func (d doc) validate(s map[string]any, v any, at string) error {
	s = d.resolve(s)
	if len(s) == 0 {
		return nil
	}
	if ty, ok := s["type"]; ok {
		var types []string
		switch ty := ty.(type) {
		case string:
			types = []string{ty}
		case []any:
			for _, x := range ty {
				types = append(types, x.(string))
			}
		}
		if !typeOK(types, v) {
			return fmt.Errorf("%s: %v (%T) is not of type %v", at, v, v, types)
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if e == v {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
		}
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for _, r := range asList(s["required"]) {
			if _, ok := v[r]; !ok {
				return fmt.Errorf("%s: required property %q missing", at, r)
			}
		}
		for k, x := range v {
			ps, ok := props[k]
			if !ok {
				if s["additionalProperties"] == false {
					return fmt.Errorf("%s: property %q not in the schema", at, k)
				}
				continue
			}
			if err := d.validate(d.resolve(ps), x, at+"."+k); err != nil {
				return err
			}
		}
	case []any:
		if items, ok := s["items"]; ok {
			for i, x := range v {
				if err := d.validate(d.resolve(items), x, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func asList(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		out = append(out, x.(string))
	}
	return out
}

func typeOK(types []string, v any) bool {
	for _, ty := range types {
		switch ty {
		case "null":
			if v == nil {
				return true
			}
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "integer":
			if f, ok := v.(float64); ok && f == float64(int64(f)) {
				return true
			}
		case "number":
			if _, ok := v.(float64); ok {
				return true
			}
		}
	}
	return false
}

// TestValidatorRejects makes sure the schema check used by every handler
// test can fail.
func TestValidatorRejects(t *testing.T) {
	d := loadDoc(t)
	slotSchema := d.resolve(map[string]any{"$ref": "#/components/schemas/Slot"})
	for _, bad := range []string{
		`{"time":"x","status":"NOPE","externalID":null,"retryCount":0}`,
		`{"time":"x","status":"WAITING","retryCount":0}`,
		`{"time":"x","status":"WAITING","externalID":3,"retryCount":0}`,
		`{"time":"x","status":"WAITING","externalID":null,"retryCount":0,"extra":1}`,
		`[]`,
	} {
		var v any
		_ = json.Unmarshal([]byte(bad), &v)
		if d.validate(slotSchema, v, "$") == nil {
			t.Errorf("validator accepted %s", bad)
		}
	}
	var ok any
	_ = json.Unmarshal([]byte(`{"time":"x","status":"WAITING","externalID":null,"retryCount":0}`), &ok)
	if err := d.validate(slotSchema, ok, "$"); err != nil {
		t.Errorf("validator rejected a good slot: %v", err)
	}
}
