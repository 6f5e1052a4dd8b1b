package serve

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
)

// The approvals inbox: plain HTML, CSS and JavaScript embedded in the
// binary, no build step and nothing fetched from elsewhere. The page
// holds the API key in the tab's sessionStorage and sends it as a bearer
// header; it never sets a cookie, so another site cannot make the browser
// act with it (CSRF), and everything it shows from the server is set as
// text, never parsed as HTML (XSS). The Content-Security-Policy forbids
// inline scripts and every origin but this one.
// Why: RATIONALE.md, "The page holds the key, not a cookie".
//
//go:embed web
var webFS embed.FS

//go:embed openapi.json
var openAPIDoc []byte

// contentSecurityPolicy is sent with every response.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) pageRoutes() {
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		panic(err) // the embedded directory exists: a build error
	}
	files := http.FileServerFS(sub)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, sub, "index.html")
	})
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if path.Ext(r.URL.Path) == "" {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})))
}

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDoc)
}
