package webhook

import "testing"

// TestOnlyItsProviderHasEachQuirk: Discord alone asks for 204, Intercom alone checks with a
// HEAD, Slack alone stops retrying on a header; every other scheme reports none of them.
func TestOnlyItsProviderHasEachQuirk(t *testing.T) {
	t.Parallel()
	for _, name := range Names {
		opts := Options{}
		switch name {
		case HMACSHA256:
			opts.Header = "X-Sig"
		case Twilio, Square:
			opts.URL = "https://example.com/hooks/x"
		}
		s := mustNew(t, name, opts)
		noContent, head, retry := false, false, ""
		if q, ok := s.(NoContentAnswerer); ok {
			noContent = q.AnswersNoContent()
		}
		if q, ok := s.(HeadAnswerer); ok {
			head = q.AnswersHead()
		}
		if q, ok := s.(NoRetryMarker); ok {
			if h, v := q.NoRetryHeader(); h != "" {
				retry = h + ": " + v
			}
		}
		wantRetry := ""
		if name == Slack {
			wantRetry = "X-Slack-No-Retry: 1"
		}
		if noContent != (name == Discord) || head != (name == Intercom) || retry != wantRetry {
			t.Errorf("%s: 204 %v, HEAD %v, no-retry header %q", name, noContent, head, retry)
		}
	}
}
