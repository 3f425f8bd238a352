package notify

import (
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The webhook body documented in the server's openapi.json is the one
// Body encodes: the same fields, the same required ones, and the
// description names the headers.
func TestOpenAPIDocumentsTheBody(t *testing.T) {
	data, err := os.ReadFile("../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Info struct {
			Description string `json:"description"`
		} `json:"info"`
		Webhooks   map[string]any `json:"webhooks"`
		Components struct {
			Schemas map[string]struct {
				Required   []string       `json:"required"`
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	schema, ok := doc.Components.Schemas["WebhookEvent"]
	if !ok || doc.Webhooks["slotEvent"] == nil {
		t.Fatal("openapi.json has no WebhookEvent schema or slotEvent webhook")
	}
	var fields, required []string
	bt := reflect.TypeOf(Body{})
	for i := range bt.NumField() {
		name, opts, _ := strings.Cut(bt.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
		if opts != "omitempty" {
			required = append(required, name)
		}
	}
	var documented []string
	for k := range schema.Properties {
		documented = append(documented, k)
	}
	sort.Strings(fields)
	sort.Strings(documented)
	sort.Strings(required)
	sort.Strings(schema.Required)
	if d := cmp.Diff(fields, documented); d != "" {
		t.Errorf("documented fields (-Body +openapi.json):\n%s", d)
	}
	if d := cmp.Diff(required, schema.Required); d != "" {
		t.Errorf("required fields (-Body +openapi.json):\n%s", d)
	}
	for _, h := range []string{"X-Celos-Signature", "X-Celos-Delivery", "X-Celos-Event", "X-Celos-Attempt", "HMAC-SHA256", "celos_notifications_total"} {
		if !strings.Contains(doc.Info.Description, h) {
			t.Errorf("the API description does not mention %s", h)
		}
	}
}
