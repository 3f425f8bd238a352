package cmd

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/deploy"
)

// TestWriteDeploymentsQuotesFields: the fields of a deploy manifest (the
// user from CELOS_CI_USERNAME, the host, the commit, all stored on the
// installation) are quoted in the table when they hold a control
// character, so that a newline cannot forge a row and an escape sequence
// cannot reach the terminal.
func TestWriteDeploymentsQuotesFields(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var b strings.Builder
	writeDeployments(&b, "file:///t.json", []deploy.Deployment{{
		Project: "wc", Manifest: true, Workflows: 3, DeployedAt: at,
		User: "bob\nwc  3  -  2026  evil\x1b[31m", Host: "vm", GitCommit: "abc\tdef",
	}})
	want := "1 project(s) deployed on file:///t.json:\n" +
		"PROJECT  WORKFLOWS  COMMIT      DEPLOYED              BY\n" +
		`wc       3          "abc\tdef"  2026-01-02T03:04:05Z  "bob\nwc  3  -  2026  evil\x1b[31m"@vm` + "\n"
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestWriteJSONEscapesDELAndC1: `deployments --json` prints fields read
// from the installation (another team's manifest); plan and deploy
// --json print paths of the project. DEL and the C1 controls reach the
// terminal escaped, as in the client commands' --json.
func TestWriteJSONEscapesDELAndC1(t *testing.T) {
	var b strings.Builder
	writeJSON(&b, deploy.Deployment{Project: "wc", User: "bob\u009b31m\x7f"})
	if got := b.String(); !strings.Contains(got, `"bob\u009b31m\u007f"`) {
		t.Errorf("user not escaped in %s", got)
	}
}

// TestWriteDeploymentsQuotesBidi: a bidi override in a manifest's field
// (U+202E, a format character, not a control one) reordered the row on a
// terminal; it is quoted as well.
func TestWriteDeploymentsQuotesBidi(t *testing.T) {
	var b strings.Builder
	writeDeployments(&b, "file:///t.json", []deploy.Deployment{{
		Project: "wc", Manifest: true, Workflows: 1, User: "bob", Host: "vm\u202eevil",
	}})
	if got := b.String(); strings.ContainsRune(got, '\u202e') || !strings.Contains(got, `bob@"vm\u202eevil"`) {
		t.Errorf("the bidi override is not quoted:\n%q", got)
	}
}
