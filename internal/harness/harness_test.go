package harness

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/webhook"
)

// A receiver that answers every event's first delivery 503 with Retry-After: the storm sends
// it again, and every delivery ends answered.
func TestStormRetries503s(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Webhook-Id")
		mu.Lock()
		seen[id]++
		n := seen[id]
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, `{"received":true,"duplicate":%t}`, n > 2)
	}))
	defer srv.Close()
	scheme, _ := webhook.New("standard-webhooks", webhook.Options{})
	s := &Sender{URL: srv.URL, Scheme: scheme, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Client: srv.Client()}
	rep := Storm(context.Background(), s, StormConfig{Run: "t", Events: []int{0, 1, 2, 3, 4}, Copies: 2, Concurrency: 4, Retries: 3, RetryDelay: 10 * time.Millisecond})
	if rep.Retried != 5 || rep.Sent != 15 || rep.Accepted != 5 || rep.Duplicates != 5 || len(rep.Statuses) != 0 || len(AnswerProblems(rep, 5, 10)) > 0 {
		t.Fatalf("%+v", rep)
	}
	// Without retries the 503s are final, and the answers do not add up.
	mu.Lock()
	seen = map[string]int{}
	mu.Unlock()
	rep = Storm(context.Background(), s, StormConfig{Run: "u", Events: []int{0}, Copies: 1, Concurrency: 1})
	if rep.Statuses[http.StatusServiceUnavailable] != 1 || len(AnswerProblems(rep, 1, 1)) == 0 {
		t.Fatalf("%+v", rep)
	}
}

func TestDownstreamFaults(t *testing.T) {
	d, err := StartDownstream("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	srv := httptest.NewServer(http.HandlerFunc(d.serve))
	defer srv.Close()
	call := func(key string, timeout time.Duration) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	draws := []float64{0.05, 0.15, 0.25, 0.35, 0.9, 0.9}
	var mu sync.Mutex
	d.SetFaults(faults.Rates{Throttle: 0.1, Error: 0.1, Lose: 0.1, Timeout: 0.1}, func() float64 {
		mu.Lock()
		defer mu.Unlock()
		u := draws[0]
		draws = draws[1:]
		return u
	})
	if got := call("k:1", time.Second); got != http.StatusTooManyRequests {
		t.Fatalf("throttle: %d", got)
	}
	if got := call("k:1", time.Second); got != http.StatusInternalServerError || d.Applied("k:1") {
		t.Fatalf("error: %d, applied %v", got, d.Applied("k:1"))
	}
	if got := call("k:1", time.Second); got != http.StatusInternalServerError || !d.Applied("k:1") {
		t.Fatalf("lose: %d, applied %v", got, d.Applied("k:1"))
	}
	if got := call("k:2", 100*time.Millisecond); got != 0 || d.Applied("k:2") {
		t.Fatalf("timeout: %d, applied %v", got, d.Applied("k:2"))
	}
	if call("k:1", time.Second) != 200 || call("k:2", time.Second) != 200 {
		t.Fatal("no fault: want 200")
	}
	st := d.Stats("k:")
	if st.Keys != 2 || st.Applied != 2 || st.Calls != 6 || st.Repeats != 1 ||
		st.Injected[faults.Throttle] != 1 || st.Injected[faults.Error] != 1 || st.Injected[faults.Lose] != 1 || st.Injected[faults.Timeout] != 1 {
		t.Fatalf("%+v", st)
	}
}

// post calls the downstream as the outbox would.
func post(t *testing.T, url, key string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func TestARunWhoseIntentsAllParkedIsNotASuccess(t *testing.T) {
	tally := Tally{Claims: 10, Intents: map[string]int{"parked": 10}}
	for i := range 10 {
		tally.Parked = append(tally.Parked, ParkedIntent{Key: fmt.Sprintf("shop:msg_r_%06d:email.send", i)})
	}
	if p := CheckOutbox(Expect{Events: 10}, tally, nil, ""); len(p) == 0 {
		t.Fatal("every intent parked with 0 attempts and no downstream call: reported as fine")
	}
	// No executor for the target: permanent, but the run asked for no permanent failure.
	for i := range tally.Parked {
		tally.Parked[i].Attempts, tally.Parked[i].LastError = 1, `permanent: no executor for target "email"`
	}
	if p := CheckOutbox(Expect{Events: 10}, tally, nil, ""); len(p) == 0 {
		t.Fatal("intents parked as permanent without an injected refusal: reported as fine")
	}
	// Asked for: a downstream that refuses some calls with 422; each parked intent says so.
	if p := CheckOutbox(Expect{Events: 10, Downstream: faults.Rates{Reject: 0.1}}, tally, nil, ""); len(p) != 0 {
		t.Fatalf("parked on purpose, each with its reason: %v", p)
	}
}

func TestRepeatedCallsOfDoneKeysAreCaught(t *testing.T) {
	d, err := StartDownstream("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	srv := httptest.NewServer(http.HandlerFunc(d.serve))
	defer srv.Close()
	tally := Tally{Claims: 10, Intents: map[string]int{"done": 10}}
	for i := range 10 {
		key := fmt.Sprintf("shop:msg_r_%06d:email.send", i)
		tally.Done = append(tally.Done, key)
		post(t, srv.URL, key)
	}
	if p := CheckOutbox(Expect{Events: 10}, tally, d, "shop:msg_r_"); len(p) != 0 {
		t.Fatalf("one call per event, no faults: %v", p)
	}
	for _, key := range tally.Done {
		post(t, srv.URL, key)
		post(t, srv.URL, key)
	}
	p := CheckOutbox(Expect{Events: 10}, tally, d, "shop:msg_r_")
	if len(p) == 0 {
		t.Fatal("each done key POSTed 3 times with no fault: reported as fine")
	}
	t.Log(p)
	// Under faults, repeats are allowed only where an answer was lost: these were not.
	if p := CheckOutbox(Expect{Events: 10, Downstream: faults.Rates{Error: 0.1}}, tally, d, "shop:msg_r_"); len(p) == 0 {
		t.Fatal("repeats no lost answer explains, under unrelated faults: reported as fine")
	}
}

// A receiver that answers events 0-4 with a 503 first and then "duplicate", and events 5-9
// "duplicate" without ever accepting them: the run's totals could pass a global check, but
// events 5-9 were never accepted and nothing explains it.
func TestAnswersAddUpEventByEvent(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Webhook-Id")
		mu.Lock()
		seen[id]++
		n := seen[id]
		mu.Unlock()
		var i int
		fmt.Sscanf(id[strings.LastIndexByte(id, '_')+1:], "%d", &i)
		if i < 5 && n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"received":true,"duplicate":true}`)
	}))
	defer srv.Close()
	scheme, _ := webhook.New("standard-webhooks", webhook.Options{})
	s := &Sender{URL: srv.URL, Scheme: scheme, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Client: srv.Client()}
	events := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	rep := Storm(context.Background(), s, StormConfig{Run: "p", Events: events, Copies: 1, Concurrency: 4, Retries: 3, RetryDelay: 10 * time.Millisecond})
	if rep.Accepted != 0 || rep.Duplicates != 10 || rep.Retried != 5 {
		t.Fatalf("%+v", rep)
	}
	problems := AnswerProblems(rep, 10, 10)
	if len(problems) != 5 {
		t.Fatalf("problems %v: want events 5-9 named, and 0-4 (a 503 after a landed write) accepted as explained", problems)
	}
	for _, p := range problems {
		if !strings.Contains(p, "no 503") {
			t.Fatalf("problem %q", p)
		}
	}
}

// fixedSignature signs every delivery with the same X-Signature value, whatever its length.
type fixedSignature struct {
	webhook.Scheme
	value string
}

func (f fixedSignature) Sign(h http.Header, _ []byte, _, _ string, _ time.Time) error {
	h.Set("X-Signature", f.value)
	return nil
}

// A forged delivery keeps its signature header and all of its value but the end, which it
// changes, however short the value and whatever it ends in.
func TestAForgedDeliveryChangesTheEndOfItsSignature(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("X-Signature")
	}))
	defer srv.Close()
	for _, sig := range []string{"", "a", "abc", "abcd", "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
		"v1,xyzAAA=",       // already ends as a forgery does
		"t=1234,v1=ab1234", // its end appears earlier too
	} {
		s := &Sender{URL: srv.URL, Scheme: fixedSignature{value: sig}, Client: srv.Client()}
		if _, _, err := s.Send(context.Background(), "msg_1", []byte(`{}`), true); err != nil {
			t.Fatalf("%q: %v", sig, err)
		}
		if f := <-got; f == sig || !strings.HasPrefix(f, sig[:max(0, len(sig)-4)]) {
			t.Errorf("%q forged as %q, want its end changed", sig, f)
		}
	}
}

// Each event's problem says what its deliveries were answered.
func TestAnswerProblemsSayWhatAnEventsDeliveriesGot(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		name string
		got  EventAnswers
		want string // in the problem about the event; "" for none
	}{
		{"accepted once", EventAnswers{Accepted: 1, Duplicates: 2}, ""},
		{"accepted twice", EventAnswers{Accepted: 2}, "accepted 2 times"},
		{"duplicates and no 503", EventAnswers{Duplicates: 2}, "with no 503 to explain it"},
		{"a 503 sent before the first duplicate", EventAnswers{Duplicates: 1, Unavailable: 1, first503Sent: at, firstDuplicate: at.Add(time.Second)}, ""},
		{"a 503 sent after the first duplicate", EventAnswers{Duplicates: 1, Unavailable: 1, first503Sent: at.Add(time.Second), firstDuplicate: at},
			"its first duplicate came before any delivery answered 503 was sent"},
		{"only 503s", EventAnswers{Unavailable: 2, first503Sent: at}, "never accepted, and none of its deliveries was answered 200 (2 answered 503)"},
	} {
		a := c.got
		rep := &StormReport{Accepted: a.Accepted, Duplicates: a.Duplicates, Events: map[int]*EventAnswers{7: &a}}
		var about []string
		for _, p := range AnswerProblems(rep, 1, a.Accepted+a.Duplicates) {
			if strings.HasPrefix(p, "event 7") {
				about = append(about, p)
			}
		}
		if c.want == "" && len(about) > 0 || c.want != "" && (len(about) != 1 || !strings.Contains(about[0], c.want)) {
			t.Errorf("%s: %q, want %q", c.name, about, c.want)
		}
	}
}
