package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/scheduler/slot"
)

// The client commands (celos workflows, slots, trigger-status, rerun, kill,
// pause, unpause, step) call the HTTP API of a running celos server.

// DefaultServer is the server the client commands talk to when neither
// --server nor CELOS_SERVER names one.
const DefaultServer = "http://127.0.0.1:8080"

// clientOpts are the flags every client command has.
type clientOpts struct {
	server    string
	tokenFile string
	json      bool
	cmd       *cobra.Command // for its stderr (warnings)
}

func addClientFlags(c *cobra.Command) *clientOpts {
	o := &clientOpts{cmd: c}
	c.Flags().StringVar(&o.server, "server", "", "celos server URL (default $CELOS_SERVER, else "+DefaultServer+")")
	c.Flags().StringVar(&o.tokenFile, "token-file", "", "file holding the API token sent with changing requests (default $CELOS_TOKEN, else the file $CELOS_TOKEN_FILE)")
	c.Flags().BoolVar(&o.json, "json", false, "print the server's JSON answer instead of a table")
	return o
}

// client calls the API. The token (--token-file, else CELOS_TOKEN, else the
// file CELOS_TOKEN_FILE), when there is one, is sent as a bearer token.
type client struct {
	base  *url.URL
	token string
	// tokenFrom names where the token came from, for a 401: "CELOS_TOKEN",
	// "--token-file FILE" or "CELOS_TOKEN_FILE FILE".
	tokenFrom string
	hc        *http.Client
}

func (o *clientOpts) client() (*client, error) {
	s, from := o.server, "--server"
	if s == "" {
		s, from = os.Getenv("CELOS_SERVER"), "CELOS_SERVER"
	}
	if s == "" {
		s = DefaultServer
	}
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("%s %q: want an http:// or https:// URL such as %s", from, redactUserinfo(s), DefaultServer)
	}
	token, from, err := o.token()
	if err != nil {
		return nil, err
	}
	return &client{base: u, token: token, tokenFrom: from, hc: &http.Client{CheckRedirect: noRedirect}}, nil
}

// userinfoPassword is the password of a URL's user information, to the
// last "@" (too much rather than a part of the password when the URL is
// malformed).
var userinfoPassword = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://)?([^/@:]*):.*@`)

// redactUserinfo shows a URL that may not parse without its password, as
// url.URL.Redacted does for one that does.
func redactUserinfo(s string) string {
	return userinfoPassword.ReplaceAllString(s, "${1}${2}:xxxxx@")
}

// noRedirect keeps the client from following a redirect: the API never
// redirects, and Go's client would send the token on to another port or
// subdomain of the host, or over plain http (and turn a POST into a GET).
// call reports the redirect instead.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// token returns the API token and where it came from: the content of
// --token-file, else $CELOS_TOKEN, else the content of the file
// $CELOS_TOKEN_FILE ("" if none).
func (o *clientOpts) token() (token, from string, err error) {
	file, flag := o.tokenFile, "--token-file"
	if file == "" {
		if t := strings.TrimSpace(os.Getenv("CELOS_TOKEN")); t != "" {
			if hasControl(t) {
				return "", "", usageError("CELOS_TOKEN: want one line holding the token, without control characters")
			}
			return t, "CELOS_TOKEN", nil
		}
		file, flag = os.Getenv("CELOS_TOKEN_FILE"), "CELOS_TOKEN_FILE"
	}
	if file == "" {
		return "", "", nil
	}
	b, err := regfile.ReadFile(file, 4<<10)
	if err != nil {
		return "", "", usageError("%s: %v", flag, err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" || hasControl(t) {
		return "", "", usageError("%s %s: want one line holding the token, without control characters", flag, file)
	}
	if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o044 != 0 {
		// As ssh warns about a key; not refused: the secret that guards
		// the server is its --auth-token-file, and a team may share a
		// client's token file through a group on purpose.
		fmt.Fprintf(o.cmd.ErrOrStderr(), "celos: warning: %s %s can be read by other users (mode %04o): chmod 600 %s\n",
			flag, printable(file), fi.Mode().Perm(), printable(file))
	}
	return t, flag + " " + printable(file), nil
}

// hasControl tells whether s has a control character (a line break
// included), which no token has and no HTTP header may carry.
func hasControl(s string) bool { return strings.IndexFunc(s, unicode.IsControl) >= 0 }

// apiError is an error answer of the server.
type apiError struct {
	Method, Path string
	Code         int    // the HTTP status
	Msg          string // the answer's error, for people
	// Kind is the answer's machine-readable code ("not_due", ...; the
	// Error schema of openapi.json); "" from a server older than codes.
	Kind string
	// ServerTime is the server's clock, given with Kind "not_due".
	ServerTime string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, http.StatusText(e.Code), e.Msg)
}

// call sends a request and returns the body of a 2xx answer; other answers
// become an *apiError with the server's message.
func (c *client) call(ctx context.Context, method, path string, q url.Values, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s %s: no answer from the celos server at %s within %v (--server, CELOS_SERVER)", method, path, c.base.Redacted(), timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s %s: cannot reach the celos server at %s (--server, CELOS_SERVER): %w", method, path, c.base.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		where := printable(resp.Header.Get("Location"))
		if loc, err := resp.Location(); err == nil {
			where = printable(loc.Redacted())
		}
		return nil, fmt.Errorf("%s %s: the server at %s redirected to %s (%d): celos does not follow redirects, nor send its token there; give the celos server's own URL (--server, CELOS_SERVER)", method, path, c.base.Redacted(), where, resp.StatusCode)
	}
	limit := maxAnswer
	if resp.StatusCode/100 != 2 {
		limit = maxErrorAnswer
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("%s %s: the celos server at %s did not finish its answer within %v", method, path, c.base.Redacted(), timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer of the celos server at %s: %w", method, path, c.base.Redacted(), err)
	}
	tooLarge := len(body) > limit
	if tooLarge && resp.StatusCode/100 == 2 {
		return nil, fmt.Errorf("%s %s: the answer of the celos server at %s is larger than %d MiB: not a celos answer", method, path, c.base.Redacted(), maxAnswer>>20)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error      string `json:"error"`
			Code       string `json:"code"`
			ServerTime string `json:"serverTime"`
		}
		var msg string
		if !tooLarge && json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = printable(e.Error)
		} else {
			e.Code, e.ServerTime = "", ""
			msg = foreignAnswer(body, tooLarge)
		}
		if resp.StatusCode == http.StatusUnauthorized {
			if c.token == "" {
				msg += " (no token given: set CELOS_TOKEN, CELOS_TOKEN_FILE or --token-file)"
			} else {
				msg += " (the token from " + c.tokenFrom + " was refused)"
			}
		}
		return nil, &apiError{Method: method, Path: path, Code: resp.StatusCode, Msg: msg, Kind: e.Code, ServerTime: e.ServerTime}
	}
	return body, nil
}

// foreignAnswer shows an error answer that is not celos's JSON (a plain
// text message as is; a proxy's HTML page or anything long or with
// control characters clipped and quoted, never poured onto the terminal).
func foreignAnswer(body []byte, tooLarge bool) string {
	const max = 200
	trimmed := bytes.TrimSpace(body)
	if !tooLarge && len(trimmed) <= max {
		if msg := string(trimmed); printable(msg) == msg {
			return msg
		}
	}
	size := fmt.Sprintf("%d bytes", len(body))
	if tooLarge {
		size = fmt.Sprintf("more than %d MiB", maxErrorAnswer>>20)
	}
	return fmt.Sprintf("not a celos answer (%s): %s", size, answerStart(trimmed))
}

// answerStart shows the start of an answer that is not what was expected:
// its first 200 bytes, quoted (control characters escaped).
func answerStart(b []byte) string {
	const max = 200
	if len(b) > max {
		return strconv.Quote(strings.ToValidUTF8(string(b[:max]), "") + "...")
	}
	return strconv.Quote(string(b))
}

// maxAnswer bounds the answer the client reads (and holds in memory): the
// largest celos answer, the slots of 7 days of a workflow due every
// minute, is 1.65 MB (docs/benchmarks.md). A larger answer is an error,
// never cut short and shown as if it were whole. An error answer is read
// up to maxErrorAnswer (celos's are a line of JSON; of another server's
// page only the start is shown).
const (
	maxAnswer      = 64 << 20
	maxErrorAnswer = 8 << 20
)

// printable returns s quoted when it has a control character or is not
// UTF-8 (an escape sequence must not reach the terminal), else s.
func printable(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// json calls and decodes a JSON answer into out (when not nil); it returns the raw answer too.
func (c *client) json(ctx context.Context, method, path string, q url.Values, timeout time.Duration, out any) ([]byte, error) {
	body, err := c.call(ctx, method, path, q, timeout)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return nil, fmt.Errorf("%s %s: the answer of the celos server at %s is not celos's JSON (%w): %d bytes: %s", method, path, c.base.Redacted(), err, len(body), answerStart(body))
		}
	}
	return body, nil
}

// Timeouts of the client's calls: a step answers when it is done.
var (
	callTimeout = time.Minute
	stepTimeout = 10 * time.Minute
)

// failed ends a client command whose call failed (exit 1).
func failed(err error) error { return &ExitError{Code: ExitFailure, Err: err} }

// timeFlag parses a time flag, as the API does (ISO 8601, UTC or offset).
func timeFlag(name, v string) (time.Time, error) {
	t, err := slot.ParseTime(v)
	if err != nil {
		return time.Time{}, usageError("--%s: %v", name, err)
	}
	return t, nil
}

// slotQuery is the id and time of one slot.
func slotQuery(id string, t time.Time) url.Values {
	return url.Values{"id": {id}, "time": {slot.FormatTime(t)}}
}

// requireID checks --id.
func requireID(id string) error {
	if id == "" {
		return usageError("--id is required")
	}
	return nil
}

// requireSlot checks the --id and --time of a command about one slot and
// parses the time.
func requireSlot(id, at string) (time.Time, error) {
	if err := requireID(id); err != nil {
		return time.Time{}, err
	}
	if at == "" {
		return time.Time{}, usageError("--time is required")
	}
	return timeFlag("time", at)
}

// writeJSONOut prints a JSON answer as it came, but for the characters a
// terminal may act on that valid JSON carries raw (escapeJSONControls).
func writeJSONOut(w io.Writer, body []byte) {
	body = escapeJSONControls(body)
	w.Write(body)
	if len(body) > 0 && body[len(body)-1] != '\n' {
		io.WriteString(w, "\n")
	}
}

// escapeJSONControls writes, in valid JSON, DEL and the C1 controls
// (U+0080-U+009F; U+009B is CSI to some terminals) as \u escapes, and a
// byte that is not UTF-8 as \ufffd (encoding/json's reading of it):
// JSON allows them raw in strings (only what is below U+0020 must be
// escaped), and they can be nowhere else, so the result is the same JSON
// value. Everything else is copied as it is.
func escapeJSONControls(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		var esc string
		switch {
		case r == utf8.RuneError && n == 1:
			esc = `\ufffd`
		case r == 0x7f || (r >= 0x80 && r <= 0x9f):
			esc = fmt.Sprintf(`\u%04x`, r)
		default:
			i += n
			continue
		}
		out = append(append(out, b[last:i]...), esc...)
		i += n
		last = i
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// orDash shows an empty or null value as "-".
func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}
