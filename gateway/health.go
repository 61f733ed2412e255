package gateway

import "net/http"

// Health endpoints, served outside /mcp and outside authentication. Their
// answers say only "ok" or "not ready": nothing about tools, upstreams or
// callers.
const (
	LivenessPath  = "/healthz"
	ReadinessPath = "/readyz"
)

// liveness answers 200 while the process serves HTTP at all.
func liveness(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

// readiness answers 200 when ready says so and the gateway is not
// draining, else 503, so a load balancer sends new sessions elsewhere.
func readiness(ready func() bool, t *tracker) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		t.mu.Lock()
		draining := t.draining || t.unready
		t.mu.Unlock()
		if draining || (ready != nil && !ready()) {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}
