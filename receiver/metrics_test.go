package receiver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/emf"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// emitted reads the (metric, dimensions) pairs of every EMF document in a metrics buffer.
func emitted(t *testing.T, text string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var doc struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Namespace  string     `json:"Namespace"`
					Dimensions [][]string `json:"Dimensions"`
					Metrics    []struct{ Name string }
				} `json:"CloudWatchMetrics"`
			} `json:"_aws"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		for _, d := range doc.AWS.CloudWatchMetrics {
			for _, m := range d.Metrics {
				for _, dims := range d.Dimensions {
					out[key(emf.Metric{Name: m.Name, Dimensions: dims})] = true
				}
			}
		}
	}
	return out
}

func key(m emf.Metric) string { return m.Name + "/" + strings.Join(m.Dimensions, ",") }

// TestTheReceiverWritesExactlyItsMetricCatalog drives a delivery of every kind and holds the
// metrics written to receiver.EmittedMetrics, both ways: the stack's dashboard and alarms are
// built from that list, so a metric the code stops (or starts) writing must change it.
func TestTheReceiverWritesExactlyItsMetricCatalog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handler = e.handlerWith(func(p *receiver.Planners) {
		p.Handle("stripe", "boom", func(context.Context, dedup.Event) (dedup.Plan, error) {
			return dedup.Plan{}, fmt.Errorf("a planner bug")
		})
	})
	post := func(source, body string, hdr http.Header, id string) { e.post(e.request(source, body, hdr, id)) }
	post("shop", orderBody("msg_m1", "ord_m1"), nil, "msg_m1")                                                                      // Accepted (a planned type)
	post("shop", orderBody("msg_m1", "ord_m1"), nil, "msg_m1")                                                                      // Duplicate
	post("shop", orderBody("msg_m1", "ord_m1_other"), nil, "msg_m1")                                                                // a PayloadMismatch
	post("shop", orderBody("msg_m2", "ord_m1"), nil, "msg_m2")                                                                      // BackstopAbsorbed: one shipment per order
	post("shop", `{"type":"order.refunded"}`, nil, "msg_m3")                                                                        // UnknownType
	post("shop", `not json`, nil, "msg_m4")                                                                                         // Rejected
	post("stripe", fmt.Sprintf(`{"id":"evt_boom","type":"boom","created":%d}`, e.clock().Unix()), nil, "")                          // Failed
	post("partner", `{"meta":{"id":"inv_1","type":"t","at":"2000-01-01T00:00:00Z"}}`, http.Header{"X-Partner-Delivery": {"d"}}, "") // TooOld
	req := e.request("shop", orderBody("msg_m5", "ord_m5"), nil, "msg_m5")
	req.Headers["webhook-signature"] = "v1,AAAA"
	e.post(req) // SignatureRejected
	gh := loadFixture(t, "github-push.json")
	e.post(gh)
	e.post(withHeaders(gh, "x-github-delivery", "forged")) // ReplayRefused

	// Unavailable and LostResponseRecovered need DynamoDB to misbehave.
	throttle := newEnv(t, withClient(awstest.WithTransport(&awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "TransactWriteItems", N: -1, Status: 400, Body: throttled})))
	throttle.post(throttle.request("shop", orderBody("msg_m6", "ord_m6"), nil, "msg_m6"))
	lose := newEnv(t, withClient(awstest.WithTransport(&awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "PutItem", N: 1})))
	lose.post(lose.request("shop", `{"type":"order.refunded"}`, nil, "msg_m7"))

	// SecretRefreshFailed needs the secrets' store to fail at their maximum age.
	stale := newEnv(t)
	h, err := receiver.New(receiver.Config{Sources: stale.file, Secrets: failingStale{stale.secretsStore()}, Store: stale.store,
		Planners: receiver.NewPlanners(), Metrics: lockedWriter{&stale.mu, &stale.metrics}, Now: stale.clock})
	if err != nil {
		t.Fatal(err)
	}
	stale.handler = h
	stale.post(stale.request("shop", `{"type":"order.refunded"}`, nil, "msg_m8"))

	// Probed needs a redrive: duplicates the most of the source's recent deliveries.
	redrive := newEnv(t)
	reqs := redrive.sendNew(receiver.WindowMin, redrive.shopEvent("msg_m9"))
	redrive.redrive(reqs)
	redrive.redeliver(reqs[0])

	got := emitted(t, e.metricsText()+"\n"+throttle.metricsText()+"\n"+lose.metricsText()+"\n"+stale.metricsText()+"\n"+redrive.metricsText())
	want := map[string]bool{}
	for _, m := range receiver.EmittedMetrics() {
		want[key(m)] = true
	}
	var missing, extra []string
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("catalog but never written: %v\nwritten but not in the catalog: %v", missing, extra)
	}
}

// failingStale is secrets whose store fails every re-read at their maximum age.
type failingStale struct{ *sources.Secrets }

func (failingStale) RefreshStale(context.Context, string) error {
	return errors.New("secret secretsmanager:oncehook/shop: the store is unreachable")
}
