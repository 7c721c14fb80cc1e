package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// localWakeups is the retry queue in one process: a wake-up puts the claim back on the work
// queue at its due time.
type localWakeups struct {
	work chan string
	wg   *sync.WaitGroup
}

func (l *localWakeups) Schedule(_ context.Context, pk string, due time.Time) error {
	l.wg.Add(1)
	time.AfterFunc(time.Until(due), func() { l.work <- pk })
	return nil
}

// BenchmarkARedriveAtARate: 2,000 intents parked by a downstream's refusal, re-driven at once,
// run by 4 workers (4 invocations, each with a batch of claims at a time, as the stream
// delivers a redrive's records) against a target with rate 20 and a downstream taking 50 ms:
// the downstream's busiest 5 seconds, and every intent done, none parked (docs/measured.md):
//
//	go test ./outbox -run '^$' -bench ARedriveAtARate -benchtime 1x -timeout 20m
func BenchmarkARedriveAtARate(b *testing.B) {
	const intents, rate, workers, batchSize = 2000, 20, 4, 100
	for range b.N {
		e := newEnv(b)
		down := newLimitedDownstream(b, 50*time.Millisecond)
		for i := range intents {
			e.commitOne(fmt.Sprintf("evt_redrive_%04d", i))
		}
		// Parked first: every call refused.
		refuse := e.worker(func(c *outbox.Config) {
			c.Executors["email"] = &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}
		})
		down.setRefuse(true)
		for _, c := range e.claims() {
			if _, err := refuse.Process(context.Background(), c); err != nil {
				b.Fatal(err)
			}
		}
		if st := e.statuses(); st[dedup.IntentParked] != intents {
			b.Fatalf("setup: %v, want every intent parked", st)
		}
		down.setRefuse(false)
		var wg sync.WaitGroup
		wake := &localWakeups{work: make(chan string, intents), wg: &wg}
		var ws []*outbox.Worker
		for range workers {
			ws = append(ws, e.worker(func(c *outbox.Config) {
				c.Executors["email"] = &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}
				c.Limits = map[string]outbox.Limit{"email": {Rate: rate}}
				c.Scheduler = wake
			}))
		}
		for _, c := range e.claims() {
			if err := redriveAt(context.Background(), e.client, e.table, c, "email.send", e.now()); err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			wake.work <- c.PK
		}
		b.ResetTimer()
		start := time.Now()
		for _, w := range ws {
			go func() {
				for {
					var pks []string
					pks = append(pks, <-wake.work)
				fill:
					for len(pks) < batchSize {
						select {
						case pk := <-wake.work:
							pks = append(pks, pk)
						default:
							break fill
						}
					}
					var batch sync.WaitGroup
					for _, pk := range pks {
						batch.Go(func() {
							defer wg.Done()
							c, err := dedup.GetClaim(context.Background(), e.client, e.table, "shop", strings.TrimPrefix(pk, dedup.ClaimKey("shop", "")))
							if err != nil {
								b.Error(err)
								return
							}
							ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
							defer cancel()
							_, _ = w.Process(ctx, c)
						})
					}
					batch.Wait()
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		b.StopTimer()
		st := e.statuses()
		if st[dedup.IntentDone] != intents {
			b.Fatalf("intents %v, want all %d done", st, intents)
		}
		b.ReportMetric(float64(down.mostIn(5*time.Second))/5, "max-calls/s-over-5s")
		b.ReportMetric(float64(down.mostIn(time.Second)), "max-calls-in-1s")
		b.ReportMetric(float64(intents)/took.Seconds(), "calls/s")
		b.Logf("%d intents re-driven at rate %d by %d workers: all done in %s, busiest 5 s %d calls (%.1f/s), busiest second %d",
			intents, rate, workers, took.Round(time.Second), down.mostIn(5*time.Second), float64(down.mostIn(5*time.Second))/5, down.mostIn(time.Second))
	}
}
