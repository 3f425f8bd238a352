package api

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/celos-go/celos/internal/regfile"
)

// MinTokenLength is the shortest API token LoadToken accepts (bytes). A
// token is a shared secret: `openssl rand -hex 32` makes a good one.
const MinTokenLength = 16

// maxTokenFile bounds a token file.
const maxTokenFile = 4 << 10

// LoadToken reads an API token from a file: its content without the
// surrounding white space (a trailing newline is usual). It refuses an
// empty, short (< MinTokenLength) or multi-line token, and one with
// characters other than printable ASCII (it travels in an HTTP header).
// The error never quotes the file's content. warn, when not empty, says
// that the file can be read by other users of the machine.
func LoadToken(path string) (token, warn string, err error) {
	// Never blocks on a named pipe, never reads a device (regfile).
	f, fi, err := regfile.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("auth token file: %w", err)
	}
	defer f.Close()
	if fi.Size() > maxTokenFile {
		return "", "", fmt.Errorf("auth token file %s: larger than %d bytes", path, maxTokenFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", "", fmt.Errorf("auth token file: %w", err)
	}
	if len(data) > maxTokenFile {
		return "", "", fmt.Errorf("auth token file %s: larger than %d bytes", path, maxTokenFile)
	}
	b := bytes.TrimSpace(data)
	switch {
	case len(b) == 0:
		return "", "", fmt.Errorf("auth token file %s: empty", path)
	case len(b) < MinTokenLength:
		return "", "", fmt.Errorf("auth token file %s: the token is %d bytes, want at least %d (e.g. openssl rand -hex 32)", path, len(b), MinTokenLength)
	}
	for _, c := range b {
		if c <= ' ' || c >= 0x7f {
			return "", "", fmt.Errorf("auth token file %s: the token must be one line of printable ASCII without spaces", path)
		}
	}
	// Others who can read it know the token; others who can write it
	// choose it (from the next start on).
	perm := fi.Mode().Perm()
	if can := canOthers(perm); can != "" {
		warn = fmt.Sprintf("auth token file %s can be %s by other users (mode %04o); chmod 600 it", path, can, perm)
	}
	return string(b), warn, nil
}

// canOthers says what users other than the owner may do with a file of
// mode perm that matters for a secret: "read", "changed", both, or "".
func canOthers(perm os.FileMode) string {
	read, write := perm&0o044 != 0, perm&0o022 != 0
	switch {
	case read && write:
		return "read and changed"
	case read:
		return "read"
	case write:
		return "changed"
	}
	return ""
}

// ErrNoToken is the answer to a changing request without valid credentials.
var ErrNoToken = errors.New("unauthorized")

// RequireToken returns a handler that passes reads (GET, HEAD) to next and
// lets every other request through only with the header
// "Authorization: Bearer <token>". Others get 401 with a JSON error body
// and a WWW-Authenticate challenge. The comparison takes the same time
// whatever the token sent (both sides are hashed, then compared with
// crypto/subtle); neither token is ever logged: a refusal is logged with
// the method, path and client address only. An empty token panics: not
// requiring one is the caller's decision, made by not wrapping.
func RequireToken(token string, next http.Handler, log *slog.Logger) http.Handler {
	if token == "" {
		panic("api: RequireToken with an empty token")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := bearer(r.Header.Values("Authorization"))
		if ok {
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
				next.ServeHTTP(w, r)
				return
			}
		}
		challenge := `Bearer realm="celos"`
		msg := "this request changes state and needs a token: send Authorization: Bearer <token> (celos client: CELOS_TOKEN or --token-file)"
		if ok {
			challenge += `, error="invalid_token"`
			msg = "the bearer token is not valid"
		}
		log.Warn("request refused: no valid token", "method", r.Method, "path", r.URL.Path,
			"remote", r.RemoteAddr, "tokenSent", ok)
		w.Header().Set("WWW-Authenticate", challenge)
		w.Header().Set("Cache-Control", "no-store")
		writeError(w, http.StatusUnauthorized, errorBody{Error: msg, Code: codeUnauthorized})
	})
}

// bearer returns the token of the one Authorization header, if it is a
// Bearer credential (the scheme is case-insensitive, RFC 9110). More than
// one Authorization header is refused.
func bearer(vals []string) (string, bool) {
	if len(vals) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
