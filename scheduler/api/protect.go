package api

import (
	"fmt"
	"log/slog"
	"net/http"
)

// Protect puts the checks every request passes before the handlers (the
// API's and the UI's): on a server with a token, the token on requests
// that change state (RequireToken, 401 unauthorized); refusal of
// cross-site browser requests that change state (RefuseCrossOrigin, 403
// cross_site); and, when hostOK is not nil, refusal of every request
// (reads too) whose Host it refuses (CheckHost, 421 misdirected). The
// refusals are JSON error answers with their codes, as the API's own.
func Protect(h http.Handler, token string, hostOK func(string) bool, log *slog.Logger) http.Handler {
	log = orDiscard(log)
	if token != "" {
		h = RequireToken(token, h, log)
	}
	return CheckHost(RefuseCrossOrigin(h, log), hostOK, log)
}

// RefuseCrossOrigin refuses the cross-site browser requests that change
// state, so that a page on another site cannot make an operator's browser
// rerun, kill or pause through the API (http.CrossOriginProtection:
// Sec-Fetch-Site and Origin against Host): 403 with code cross_site. Reads
// and non-browser clients (curl, the CLI) pass.
func RefuseCrossOrigin(h http.Handler, log *slog.Logger) http.Handler {
	log = orDiscard(log)
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Warn("cross-origin request refused", "method", r.Method, "path", r.URL.Path,
			"origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, errorBody{Code: codeCrossSite,
			Error: "cross-origin request refused: state changes come from celos's own UI, the CLI or non-browser clients"})
	}))
	return cop.Handler(h)
}

// CheckHost answers 421 Misdirected Request (code misdirected) to a
// request whose Host allowed refuses (a name that is not the server's:
// DNS rebinding, see scheduler/server's hostPolicy); a nil allowed lets
// every request through.
func CheckHost(h http.Handler, allowed func(string) bool, log *slog.Logger) http.Handler {
	if allowed == nil {
		return h
	}
	log = orDiscard(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if allowed(r.Host) {
			h.ServeHTTP(w, r)
			return
		}
		log.Warn("request refused: Host is not a loopback name or address (DNS rebinding?)", "method", r.Method,
			"path", r.URL.Path, "host", r.Host, "remote", r.RemoteAddr)
		w.Header().Set("Cache-Control", "no-store")
		writeError(w, http.StatusMisdirectedRequest, errorBody{Code: codeMisdirected, Error: fmt.Sprintf("Host %q refused: a server without --auth-token-file answers only "+
			"localhost and loopback addresses (127.0.0.1, [::1]), so that another site's page cannot reach it through its own name (DNS rebinding); "+
			"use http://127.0.0.1:PORT, or give the server a token", r.Host)})
	})
}

// orDiscard is log, or a logger that discards when it is nil.
func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
