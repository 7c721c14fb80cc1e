package receiver_test

import "testing"

// TestTheServerSpansNameIsItsMethods: an HTTP server span is named "{method}
// {http.route}" (OpenTelemetry's HTTP conventions; "HTTP {http.route}" for a method the
// conventions do not know, http.request.method _OTHER), so that its name and its
// http.request.method never disagree. The delivery span is "POST /hooks/{source}" whatever the
// request's method: Intercom's HEAD check (answered 200), a GET or a PUT (405) are traced as
// POSTs with http.request.method HEAD, GET or PUT beside the name, and a backend grouping
// operations by span name counts them among the deliveries.
//
// The space: every method the receiver names, and one it does not, to a known source.
func TestTheServerSpansNameIsItsMethods(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct{ method, want string }{
		{"POST", "POST /hooks/{source}"},
		{"HEAD", "HEAD /hooks/{source}"},
		{"GET", "GET /hooks/{source}"},
		{"PUT", "PUT /hooks/{source}"},
		{"DELETE", "DELETE /hooks/{source}"},
		{"OPTIONS", "OPTIONS /hooks/{source}"},
		{"PROPFIND", "HTTP /hooks/{source}"},
	} {
		rec := e.traced()
		req := e.request("stripe", orderBody("evt_a5_m_"+c.method, "ord_a5_m"), nil, "")
		req.RequestContext.HTTP.Method = c.method
		_ = e.post(req)
		spans := byName(t, rec.Ended())
		if spans[c.want] == nil {
			for name, s := range spans {
				if s.Parent().IsValid() {
					continue
				}
				t.Errorf("%s request: the server span is named %q with http.request.method %q: want %q",
					c.method, name, attrs(s)["http.request.method"].Emit(), c.want)
			}
		}
	}
}
