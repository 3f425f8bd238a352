package pgtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRedact: every form of a password in a PostgreSQL connection string,
// alone or in the command line or list a failing test prints, is
// replaced; the rest (user, host, port, database, other arguments) stays.
func TestRedact(t *testing.T) {
	srv := &Server{Host: "127.0.0.1", Port: 5433, User: "celos", Password: "s3cr3t"}
	for _, tc := range []struct{ in, want string }{
		{srv.DSN("t_1"), "postgres://celos:xxxxx@127.0.0.1:5433/t_1?sslmode=disable"},
		{srv.DSNNoPassword("t_1"), "postgres://celos@127.0.0.1:5433/t_1?sslmode=disable"},
		{srv.DSNNoPassword("t_1") + "&password=s3cr3t", "postgres://celos@127.0.0.1:5433/t_1?sslmode=disable&password=xxxxx"},
		{"postgresql://u:p%40ss@[::1]:5432/db", "postgresql://u:xxxxx@[::1]:5432/db"},
		{fmt.Sprint([]string{"db", "migrate", "--db", srv.DSN("t_2")}), "[db migrate --db postgres://celos:xxxxx@127.0.0.1:5433/t_2?sslmode=disable]"},
		{fmt.Sprintf("%q", []string{"--db", "postgres://u:s3cr3t@h/db"}), `["--db" "postgres://u:xxxxx@h/db"]`},
		{"postgres://u:s3cr3t@h/db and postgres://v:s3cr3t@h/db", "postgres://u:xxxxx@h/db and postgres://v:xxxxx@h/db"},
		{"host=h user=u password=s3cr3t dbname=d", "host=h user=u password=xxxxx dbname=d"},
		{"host=h password = 's3 cr\\'3t' dbname=d", "host=h password = xxxxx dbname=d"},
		{"host=h password='s3 cr3t dbname=d", "host=h password=xxxxx"},
		{"postgres://u:s3%zz@h/db", "(a postgres URL that does not parse)"},
		{"open /var/lib/celos/state: no such file", "open /var/lib/celos/state: no such file"},
	} {
		got := Redact(tc.in)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Redact(%q) (-want +got):\n%s", tc.in, diff)
		}
		if strings.Contains(got, "s3") {
			t.Errorf("Redact(%q) = %q keeps a piece of the password", tc.in, got)
		}
	}
}
