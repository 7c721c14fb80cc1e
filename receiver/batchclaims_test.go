package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
)

// categorizedEvent is a SendGrid event whose category tells the planner what to do.
func categorizedEvent(id, category string, at time.Time) string {
	return fmt.Sprintf(`{"email":"example@test.com","timestamp":%d,"event":"open","category":%q,"sg_event_id":%q}`, at.Unix(), category, id)
}

// categoryPlanner plans "ok" events, refuses "bad" ones naming category (400), and fails "boom" ones
// (500), "blank" ones with a PayloadError naming no field.
func categoryPlanner() *receiver.Planners {
	planners := receiver.NewPlanners()
	planners.Handle("sendgrid", "open", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
		cat, _ := receiver.JSONField(ev.Payload, "category")
		switch cat {
		case "bad":
			return dedup.Plan{}, &receiver.PayloadError{Field: "category", Reason: "is refused"}
		case "boom":
			return dedup.Plan{}, errors.New("planner bug")
		case "blank":
			return dedup.Plan{}, &receiver.PayloadError{Reason: "the event is refused"}
		}
		return dedup.Plan{Intents: []dedup.Intent{{Name: "record-" + ev.ID, Target: "crm", Payload: []byte(`{}`)}}}, nil
	})
	return planners
}

// throttleBatchGet answers every BatchGetItem with a throttling error while on.
type throttleBatchGet struct {
	next http.RoundTripper
	on   atomic.Bool
}

func (t *throttleBatchGet) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.on.Load() && faults.Operation(r) == "BatchGetItem" {
		return (&awstest.InjectErrors{Next: t.next, Operation: "BatchGetItem", N: -1, Status: 400,
			Body: `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"throttled"}`}).RoundTrip(r)
	}
	return t.next.RoundTrip(r)
}

func claimedIn(t *testing.T, client *dynamodb.Client, table, id string) bool {
	t.Helper()
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dedup.ClaimKey("sendgrid", id)}, "sk": &types.AttributeValueMemberS{Value: dedup.ClaimSK}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item != nil
}

// A redelivered batch whose planner now fails for every event reads their claims together,
// 100 to a BatchGetItem, not one GetItem each: read one by one, a few hundred such events ran
// past the provider's timeout, and every retry got 503, for ever. Only a new event's failure
// is refused, and the first in the batch's order is the one named, as when each was read in turn.
func TestABatchWhoseClaimedEventsNoLongerPlanIsAnsweredFromOneReadOfTheirClaims(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	client := awstest.Client(t)
	counter := awstest.NewCounter(client)
	store, err := dedup.New(counter, dedup.Config{Table: awstest.Table(t, client), Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	refuse := false
	planners := receiver.NewPlanners()
	planners.Handle("sendgrid", "open", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
		if refuse {
			return dedup.Plan{}, &receiver.PayloadError{Field: "email", Reason: "is no longer accepted"}
		}
		return dedup.Plan{Intents: []dedup.Intent{{Name: "record", Target: "crm", Payload: []byte(`{}`)}}}, nil
	})
	post := sendgridPoster(t, f, secrets, store, planners)
	now := time.Now()
	var evs []string
	for i := range 250 {
		evs = append(evs, sgEvent(fmt.Sprintf("sg_%03d", i), "open", now))
	}
	if resp := post(sgBatch(evs...)); resp.StatusCode != 200 {
		t.Fatalf("first: %d %s", resp.StatusCode, resp.Body)
	}
	refuse = true
	counter.Reset()
	resp := post(sgBatch(evs...))
	if resp.StatusCode != 200 || resp.Body != `{"received":true,"events":250,"duplicates":250,"ignored":0}` {
		t.Fatalf("every event claimed, none plans: %d %s", resp.StatusCode, resp.Body)
	}
	if got, want := fmt.Sprint(counter.Calls("GetItem"), counter.Calls("BatchGetItem"), counter.Total()), "0 3 3"; got != want {
		t.Fatalf("GetItem, BatchGetItem, all calls: %s, want %s", got, want)
	}

	// Two new events among them whose plans fail, and a malformed one after: the first new
	// one is named, and nothing is written.
	mixed := append(slices.Clone(evs[:100]), sgEvent("sg_new1", "open", now))
	mixed = append(append(mixed, evs[100:]...), sgEvent("sg_new2", "open", now), `{"event":"open"}`)
	resp = post(sgBatch(mixed...))
	if resp.StatusCode != 400 || !strings.Contains(resp.Body, `"field":"events[100].email"`) {
		t.Fatalf("a new event's failure among claimed ones: %d %s, want 400 naming events[100].email", resp.StatusCode, resp.Body)
	}
	for _, id := range []string{"sg_new1", "sg_new2"} {
		if res, err := store.Claimed(context.Background(), dedup.Event{Source: "sendgrid", ID: id, Type: "open"}); err != nil || res.Outcome != 0 {
			t.Fatalf("%s, of the refused batch: %v %v, want not claimed", id, res.Outcome, err)
		}
	}
}

// A redelivered batch whose claimed events' plans the store now refuses (a planner changed:
// its intents' name is one dedup refuses) is the same as claimed events that no longer plan:
// every event is a duplicate, answered from their claims read together, not one GetItem each
// (and the rest of the batch checked again for each).
func TestClaimedEventsWhosePlansTheStoreNowRefusesAreReadTogether(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	client := awstest.Client(t)
	counter := awstest.NewCounter(client)
	store, err := dedup.New(counter, dedup.Config{Table: awstest.Table(t, client), Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	name := "record"
	planners := receiver.NewPlanners()
	planners.Handle("sendgrid", "open", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
		return dedup.Plan{Intents: []dedup.Intent{{Name: name, Target: "crm", Payload: []byte(`{}`)}}}, nil
	})
	post := sendgridPoster(t, f, secrets, store, planners)
	now := time.Now()
	var evs []string
	for i := range 250 {
		evs = append(evs, sgEvent(fmt.Sprintf("sg_sr_%03d", i), "open", now))
	}
	if resp := post(sgBatch(evs...)); resp.StatusCode != 200 {
		t.Fatalf("first: %d %s", resp.StatusCode, resp.Body)
	}
	name = "record now!" // the store refuses this name (dedup.ErrInvalid), before any write
	counter.Reset()
	resp := post(sgBatch(evs...))
	if resp.StatusCode != 200 || resp.Body != `{"received":true,"events":250,"duplicates":250,"ignored":0}` {
		t.Fatalf("every event claimed, every plan refused by the store: %d %s", resp.StatusCode, resp.Body)
	}
	if g, b := counter.Calls("GetItem"), counter.Calls("BatchGetItem"); g != 0 || b > 3 {
		t.Fatalf("250 claimed events whose plans the store refuses: %d GetItem, %d BatchGetItem, want their claims read together (0 GetItem, at most 3 BatchGetItem), as for events that no longer plan", g, b)
	}
}

// A batch of 150 new events that cannot be planned: the first in the batch's order is not
// claimed, so the batch is refused 400 naming it, whatever the later reads do. With the second
// BatchGetItem (the other 50 events' claims, which the answer does not need) throttled, it is
// not answered 503, as TestACommitterWithoutClaimedBatchIsNotAnswered503ForAReadItDidNotNeed
// holds for a committer without ClaimedBatch.
func TestABatchIsNotAnswered503ForAClaimsReadItDidNotNeed(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	admin := awstest.Client(t)
	table := awstest.Table(t, admin)
	inj := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "BatchGetItem", N: -1, Status: 400, Skip: 1,
		Body: `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"throttled"}`}
	store, err := dedup.New(awstest.Client(t, awstest.WithTransport(inj)), dedup.Config{Table: table, Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	post := sendgridPoster(t, f, secrets, store, categoryPlanner())
	now := time.Now()
	var elems []string
	for i := range 150 {
		elems = append(elems, categorizedEvent(fmt.Sprintf("sg_rd_%03d", i), "bad", now))
	}
	resp := post(sgBatch(elems...))
	if resp.StatusCode != 400 || !strings.Contains(resp.Body, `"field":"events[0].category"`) {
		t.Fatalf("%d %s (%d BatchGetItem refused), want 400 naming events[0].category: its claim was read, and it is new",
			resp.StatusCode, resp.Body, inj.Injected())
	}
}

// receivertest.Recorder.ClaimedBatch counts the calls dedup.Store.ClaimedBatch makes, which
// reads each claim once (BatchGetItem refuses a key twice): a batch repeating ids costs fewer
// calls. Multisets of ids, the Recorder's count against the store's.
func TestTheRecorderCountsTheClaimReadsTheStoreMakes(t *testing.T) {
	t.Parallel()
	f, _ := shapesFile(t)
	client := awstest.Client(t)
	store, err := dedup.New(client, dedup.Config{Table: awstest.Table(t, client), Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	rec := receivertest.NewRecorder(f)
	ctx := context.Background()
	for _, c := range []struct{ n, distinct int }{{1, 1}, {99, 99}, {100, 100}, {101, 101}, {150, 1}, {250, 100}, {300, 150}} {
		evs := make([]dedup.Event, c.n)
		for i := range evs {
			evs[i] = dedup.Event{Source: "sendgrid", ID: fmt.Sprintf("sg_rc_%d", i%c.distinct), Type: "open", Payload: []byte(`{}`)}
		}
		_, sc, serr := store.ClaimedBatch(ctx, evs)
		_, rc, rerr := rec.ClaimedBatch(ctx, evs)
		if serr != nil || rerr != nil {
			t.Fatal(serr, rerr)
		}
		if sc != rc {
			t.Errorf("%d events, %d distinct ids: the store made %d calls, the Recorder reports %d", c.n, c.distinct, sc, rc)
		}
	}
}

var fieldRe = regexp.MustCompile(`"field":"([^"]*)"`)

// The space: generated batches of claimed and new events, planned or refused (400) or failing
// (500), malformed ones, ids repeated in the batch, with the claims' read throttled on some
// deliveries. The answer is the one reading each failing event's claim in turn gives: the
// first event in the batch's order that stops it (a malformed one, or a failing one not claimed
// before) decides, naming its own field; a throttled read of a failing event before it is a
// 503; nothing is written unless the answer is 200, and then every new planned event is claimed.
func TestGeneratedBatchesAreAnsweredAsReadingEachClaimInTurnAnswersThem(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	admin := awstest.Client(t)
	table := awstest.Table(t, admin)
	tb := &throttleBatchGet{next: awstest.BaseTransport()}
	counter := awstest.NewCounter(awstest.Client(t, awstest.WithTransport(tb)))
	store, err := dedup.New(counter, dedup.Config{Table: table, Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	post := sendgridPoster(t, f, secrets, store, categoryPlanner())
	now := time.Now()
	claimed := map[string]bool{}
	next := 0
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 11))
		n := 1 + r.IntN(40)
		if seed%10 == 0 {
			n = 150 + r.IntN(200)
		}
		var elems []string
		type want struct {
			status int
			field  string
		}
		var decided *want
		var failedBefore bool
		inBatch := map[string]bool{}
		newOK := map[string]bool{}
		events, dups := 0, 0
		var old []string
		for id := range claimed {
			old = append(old, id)
		}
		for i := range n {
			var id string
			switch {
			case len(old) > 0 && r.IntN(2) == 0:
				id = old[r.IntN(len(old))]
			case len(inBatch) > 0 && r.IntN(8) == 0:
				for k := range inBatch {
					id = k
					break
				}
			default:
				next++
				id = fmt.Sprintf("sg_%d_%05d", seed, next)
			}
			cat := "ok"
			switch k := r.IntN(100); {
			case k < 30:
				cat = "bad"
			case k < 33 && seed%3 == 0:
				cat = "boom"
			}
			if r.IntN(150) == 0 {
				elems = append(elems, `{"event":"open","category":"ok"}`) // no sg_event_id
				if decided == nil {
					decided = &want{400, fmt.Sprintf("events[%d].", i)}
				}
				continue
			}
			elems = append(elems, categorizedEvent(id, cat, now))
			if cat != "ok" && decided == nil {
				failedBefore = true // read in settle
			}
			if cat != "ok" {
				if claimed[id] {
					events++
					dups++
				} else if decided == nil {
					st, fl := 400, fmt.Sprintf("events[%d].category", i)
					if cat == "boom" {
						st, fl = 500, ""
					}
					decided = &want{st, fl}
				}
			} else {
				events++
				if claimed[id] || inBatch[id] {
					dups++
				} else {
					newOK[id] = true
				}
			}
			inBatch[id] = true
		}
		throttled := seed%7 == 3
		tb.on.Store(throttled)
		counter.Reset()
		resp := post(sgBatch(elems...))
		tb.on.Store(false)
		what := fmt.Sprintf("seed %d (%d events, throttled %v)", seed, len(elems), throttled)
		switch {
		case throttled && failedBefore:
			if resp.StatusCode != 503 {
				t.Fatalf("%s: %d %s, want 503: a failing event's claim could not be read", what, resp.StatusCode, resp.Body)
			}
		case decided != nil:
			m := fieldRe.FindStringSubmatch(resp.Body)
			got := ""
			if m != nil {
				got = m[1]
			}
			ok := resp.StatusCode == decided.status
			if decided.field != "" && strings.HasSuffix(decided.field, ".") {
				ok = ok && strings.HasPrefix(got, decided.field)
			} else {
				ok = ok && got == decided.field
			}
			if !ok {
				t.Fatalf("%s: %d %s, want %d naming %q", what, resp.StatusCode, resp.Body, decided.status, decided.field)
			}
		default:
			body := fmt.Sprintf(`{"received":true,"events":%d,"duplicates":%d,"ignored":0}`, events, dups)
			if resp.StatusCode != 200 || resp.Body != body {
				t.Fatalf("%s: %d %s, want 200 %s", what, resp.StatusCode, resp.Body, body)
			}
			for id := range newOK {
				claimed[id] = true
			}
		}
		if resp.StatusCode != 200 {
			for id := range newOK {
				if claimedIn(t, admin, table, id) {
					t.Fatalf("%s: %s claimed by a delivery answered %d", what, id, resp.StatusCode)
				}
			}
		}
		if g := counter.Calls("GetItem"); g != 0 {
			t.Fatalf("%s: %d GetItem calls, want the claims read together", what, g)
		}
		if b := counter.Calls("BatchGetItem"); !throttled && b > (len(elems)+99)/100 {
			t.Fatalf("%s: %d BatchGetItem calls for %d events", what, b, len(elems))
		}
	}
}

// noBatchReads is an application's Committer over the store without ClaimedBatch (a
// receiver.Committer, as New accepts): a wrapper, an observer, a store of its own.
type noBatchReads struct{ s *dedup.Store }

func (c noBatchReads) Commit(ctx context.Context, ev dedup.Event, p dedup.Plan) (dedup.Result, error) {
	return c.s.Commit(ctx, ev, p)
}
func (c noBatchReads) Claimed(ctx context.Context, ev dedup.Event) (dedup.Result, error) {
	return c.s.Claimed(ctx, ev)
}
func (c noBatchReads) Retention(source string) (dedup.Retention, bool) { return c.s.Retention(source) }

// commitOnlyBatches is a receiver.BatchCommitter that writes a batch together (CommitBatch),
// and reads no batch of claims (no ClaimedBatch).
type commitOnlyBatches struct{ noBatchReads }

func (c commitOnlyBatches) CommitBatch(ctx context.Context, evs []dedup.Event, plans []dedup.Plan) ([]dedup.Result, int, error) {
	return c.s.CommitBatch(ctx, evs, plans)
}

// A Committer without ClaimedBatch reads the claims in turn and stops at the first event that
// refuses the batch: a batch whose first event is new and cannot be planned is refused after
// that one read, not after one GetItem for each of its 300 failing events.
func TestACommitterWithoutClaimedBatchReadsNoClaimPastTheFirstRefusedEvent(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	client := awstest.Client(t)
	counter := awstest.NewCounter(client)
	store, err := dedup.New(counter, dedup.Config{Table: awstest.Table(t, client), Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	post := sendgridPoster(t, f, secrets, noBatchReads{store}, categoryPlanner())
	now := time.Now()
	var elems []string
	for i := range 300 {
		elems = append(elems, categorizedEvent(fmt.Sprintf("sg_nb_%03d", i), "bad", now))
	}
	counter.Reset()
	resp := post(sgBatch(elems...))
	if resp.StatusCode != 400 || !strings.Contains(resp.Body, `"field":"events[0].category"`) {
		t.Fatalf("%d %s, want 400 naming events[0].category", resp.StatusCode, resp.Body)
	}
	if g := counter.Calls("GetItem"); g > 1 {
		t.Fatalf("a new event refused first: %d GetItem calls (one per failing event of 300), want 1", g)
	}
}

// An application's BatchCommitter without ClaimedBatch still writes a batch together: a batch
// with one new event whose plan the store refuses claims none of the batch, as dedup.Store
// itself does. Were it taken for no BatchCommitter, the batch would be committed one Commit at
// a time, and the events before the refused one claimed (their intents run) by a delivery
// answered 500.
func TestABatchCommitterWithoutClaimedBatchStillWritesTheBatchTogether(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	client := awstest.Client(t)
	table := awstest.Table(t, client)
	counter := awstest.NewCounter(client)
	store, err := dedup.New(counter, dedup.Config{Table: table, Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	planners := receiver.NewPlanners()
	planners.Handle("sendgrid", "open", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
		if ev.ID != "sg_ob_big" {
			return dedup.Plan{Intents: []dedup.Intent{{Name: "record", Target: "crm", Payload: []byte(`{}`)}}}, nil
		}
		return dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "BIG#1"}, "sk": &types.AttributeValueMemberS{Value: "X"},
			"blob": &types.AttributeValueMemberS{Value: strings.Repeat("x", 500*1024)}})}}, nil
	})
	post := sendgridPoster(t, f, secrets, commitOnlyBatches{noBatchReads{store}}, planners)
	now := time.Now()
	resp := post(sgBatch(categorizedEvent("sg_ob_1", "ok", now), categorizedEvent("sg_ob_2", "ok", now), categorizedEvent("sg_ob_big", "ok", now)))
	if resp.StatusCode != 500 {
		t.Fatalf("%d %s, want 500", resp.StatusCode, resp.Body)
	}
	for _, id := range []string{"sg_ob_1", "sg_ob_2"} {
		if claimedIn(t, client, table, id) {
			t.Fatalf("%s claimed by a batch answered 500 (%d PutItem, %d TransactWriteItems): the CommitBatch of a committer without ClaimedBatch is no longer used",
				id, counter.Calls("PutItem"), counter.Calls("TransactWriteItems"))
		}
	}
}

// A batch event refused with a PayloadError that names no field is answered naming no field,
// or the event itself: never "events[0]." (a field of an empty name).
func TestABatchsPayloadErrorNamingNoFieldNamesItsEvent(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	client := awstest.Client(t)
	store, err := dedup.New(client, dedup.Config{Table: awstest.Table(t, client), Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	post := sendgridPoster(t, f, secrets, store, categoryPlanner())
	resp := post(sgBatch(categorizedEvent("sg_blank_ok", "ok", time.Now()), categorizedEvent("sg_blank", "blank", time.Now())))
	m := fieldRe.FindStringSubmatch(resp.Body)
	if resp.StatusCode != 400 || (m != nil && strings.HasSuffix(m[1], ".")) {
		t.Fatalf("%d %s: want 400 naming no field or events[1], not %q", resp.StatusCode, resp.Body, m)
	}
}

// Concurrent deliveries of overlapping batches, each with new planned events, claimed events
// whose planner now refuses them and new events that refuse: every delivery is answered 200
// (every refused event claimed before) or 400 naming a new refused event, no event is claimed
// twice, and a batch answered 400 claims nothing.
func TestConcurrentOverlappingBatchesOfClaimedEventsThatNoLongerPlanAreAnswered200(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	client := awstest.Client(t)
	table := awstest.Table(t, client)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	plans := map[string]int{}
	planners := receiver.NewPlanners()
	refuse := atomic.Bool{}
	planners.Handle("sendgrid", "open", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
		if strings.HasPrefix(ev.ID, "sg_cc_old") && refuse.Load() {
			return dedup.Plan{}, &receiver.PayloadError{Field: "email", Reason: "no longer"}
		}
		mu.Lock()
		plans[ev.ID]++
		mu.Unlock()
		return dedup.Plan{Intents: []dedup.Intent{{Name: "record", Target: "crm", Payload: []byte(`{}`)}}}, nil
	})
	post := sendgridPoster(t, f, secrets, store, planners)
	now := time.Now()
	var olds []string
	for i := range 120 {
		olds = append(olds, categorizedEvent(fmt.Sprintf("sg_cc_old_%03d", i), "x", now))
	}
	if resp := post(sgBatch(olds...)); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode, resp.Body)
	}
	refuse.Store(true)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 4 {
				var b []string
				b = append(b, olds[(w*13+round*7)%120:][:min(50, 120-(w*13+round*7)%120)]...)
				b = append(b, categorizedEvent(fmt.Sprintf("sg_cc_new_%d", round), "x", now))
				resp := post(sgBatch(b...))
				if resp.StatusCode != 200 {
					errs <- fmt.Sprintf("worker %d round %d: %d %s", w, round, resp.StatusCode, resp.Body)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for r := range 4 {
		if !claimedIn(t, client, table, fmt.Sprintf("sg_cc_new_%d", r)) {
			t.Errorf("sg_cc_new_%d not claimed", r)
		}
	}
}

// sendgridPosterWith is sendgridPoster with the handler's Config adjusted.
func sendgridPosterWith(t *testing.T, store receiver.Committer, planners *receiver.Planners, adjust func(*receiver.Config)) func([]byte) (int, string) {
	t.Helper()
	f, secrets := shapesFile(t)
	keys := staticKeys{}
	for _, n := range f.Names() {
		keys[n] = []string{secrets[n]}
		if pk := f.Sources[n].PublicKeys; len(pk) > 0 {
			keys[n] = pk
		}
	}
	cfg := receiver.Config{Sources: f, Secrets: keys, Store: store, Planners: planners}
	if adjust != nil {
		adjust(&cfg)
	}
	h, err := receiver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return func(body []byte) (int, string) {
		req, err := receivertest.Request(f, "sendgrid", secrets["sendgrid"], body)
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := h.Handle(context.Background(), req)
		return resp.StatusCode, resp.Body
	}
}

// Events older than the retention in a batch: one claimed before is a duplicate; the first new
// one is refused naming its own occurred_at, whichever comes first; a planner that now names a
// target no executor serves: a claimed event a duplicate, a new one 500 naming its intent's target
// under its index.
func TestATooOldOrUnknownTargetBatchEventIsADuplicateWhenClaimedElseRefusedByItsIndex(t *testing.T) {
	t.Parallel()
	f, _ := shapesFile(t)
	client := awstest.Client(t)
	table := awstest.Table(t, client)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keep := f.Retentions()["sendgrid"].Effective()
	now := time.Now()
	old := now.Add(-keep - time.Hour)
	for _, id := range []string{"sg_to_c1", "sg_to_c2", "sg_ut_c1"} {
		if _, err := store.Commit(ctx, dedup.Event{Source: "sendgrid", ID: id, Type: "open", Payload: []byte(`{}`)}, dedup.Plan{}); err != nil {
			t.Fatal(err)
		}
	}
	planners := receiver.NewPlanners()
	planners.Handle("sendgrid", "open", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
		target := "crm"
		if strings.HasPrefix(ev.ID, "sg_ut") {
			target = "nowhere"
		}
		return dedup.Plan{Intents: []dedup.Intent{{Name: "rec", Target: target, Payload: []byte(`{}`)}}}, nil
	})
	post := sendgridPosterWith(t, store, planners, func(c *receiver.Config) { c.Targets = []string{"crm"} })
	for _, c := range []struct {
		elems  []string
		status int
		field  string
	}{
		{[]string{categorizedEvent("sg_to_c1", "ok", old), categorizedEvent("sg_to_n1", "ok", now), categorizedEvent("sg_to_c2", "ok", old)}, 200, ""},
		{[]string{categorizedEvent("sg_to_c1", "ok", old), categorizedEvent("sg_to_n2", "ok", old), categorizedEvent("sg_to_c2", "ok", old)}, 400, "events[1].occurred_at"},
		{[]string{categorizedEvent("sg_to_n3", "ok", now), categorizedEvent("sg_to_c2", "ok", old), categorizedEvent("sg_to_n4", "ok", old)}, 400, "events[2].occurred_at"},
		{[]string{categorizedEvent("sg_ut_c1", "ok", now), categorizedEvent("sg_ok_1", "ok", now)}, 200, ""},
		{[]string{categorizedEvent("sg_ut_c1", "ok", now), categorizedEvent("sg_ut_n1", "ok", now), categorizedEvent("sg_to_n5", "ok", old)}, 500, "events[1].intents[rec].target"},
		{[]string{categorizedEvent("sg_to_n6", "ok", old), categorizedEvent("sg_ut_n2", "ok", now)}, 400, "events[0].occurred_at"},
	} {
		st, body := post(sgBatch(c.elems...))
		m := fieldRe.FindStringSubmatch(body)
		got := ""
		if m != nil {
			got = m[1]
		}
		if st != c.status || got != c.field {
			t.Errorf("%v: %d %s, want %d naming %q", c.elems, st, body, c.status, c.field)
		}
		if st != 200 {
			for _, e := range c.elems {
				id := regexp.MustCompile(`"sg_event_id":"([^"]*)"`).FindStringSubmatch(e)[1]
				if strings.Contains(id, "_n") && claimedIn(t, client, table, id) {
					t.Errorf("%s claimed by a delivery answered %d", id, st)
				}
			}
		}
	}
}

// A Committer without ClaimedBatch: a batch whose first event is new and cannot be planned
// (a bad payload: 400) and whose later failing event's claim cannot be read (throttled) is
// refused 400, from the one read it needs; not answered 503 because a read it did not need
// failed.
func TestACommitterWithoutClaimedBatchIsNotAnswered503ForAReadItDidNotNeed(t *testing.T) {
	t.Parallel()
	f, _ := shapesFile(t)
	admin := awstest.Client(t)
	table := awstest.Table(t, admin)
	inj := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "GetItem", N: -1, Status: 400, Skip: 1,
		Body: `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"throttled"}`}
	store, err := dedup.New(awstest.Client(t, awstest.WithTransport(inj)), dedup.Config{Table: table, Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	admStore, _ := dedup.New(admin, dedup.Config{Table: table, Sources: f.Retentions()})
	if _, err := admStore.Commit(context.Background(), dedup.Event{Source: "sendgrid", ID: "sg_th_old", Type: "open", Payload: []byte(`{}`)}, dedup.Plan{}); err != nil {
		t.Fatal(err)
	}
	post := sendgridPosterWith(t, noBatchReads{store}, categoryPlanner(), nil)
	st, body := post(sgBatch(categorizedEvent("sg_th_new", "bad", time.Now()), categorizedEvent("sg_th_old", "bad", time.Now())))
	if st != 400 || !strings.Contains(body, `"field":"events[0].category"`) {
		t.Fatalf("%d %s (%d reads refused), want 400 naming events[0].category", st, body, inj.Injected())
	}
}

// A batch event refused by a planner error that blames the payload (ErrBadPayload, documented
// as a 400 with the error's message) names its event, as every refusal of a batch's event does.
func TestABatchsBadPayloadErrorNamesItsEvent(t *testing.T) {
	t.Parallel()
	f, _ := shapesFile(t)
	client := awstest.Client(t)
	store, err := dedup.New(client, dedup.Config{Table: awstest.Table(t, client), Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	planners := receiver.NewPlanners()
	planners.Handle("sendgrid", "open", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
		if ev.ID == "sg_bp_2" {
			return dedup.Plan{}, fmt.Errorf("%w: the email is not ours", receiver.ErrBadPayload)
		}
		return dedup.Plan{}, nil
	})
	post := sendgridPosterWith(t, store, planners, nil)
	now := time.Now()
	st, body := post(sgBatch(categorizedEvent("sg_bp_0", "ok", now), categorizedEvent("sg_bp_1", "ok", now), categorizedEvent("sg_bp_2", "ok", now)))
	if st != 400 || !strings.Contains(body, "events[2]") {
		t.Fatalf("%d %s: want 400 naming events[2]", st, body)
	}
}
