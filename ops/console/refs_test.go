package console_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/oncehook/oncehook/dedup"
)

// Random selections of parked intents (repeats, any order), re-driven or resolved: exactly
// the intents named change, every other stays parked.
func TestAnActionChangesExactlyTheIntentsItNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(4348457, 3))
	var ids []string
	for i := range 16 {
		id := fmt.Sprintf("evt_%02d<\"'&%c", i, 'a'+i)
		ids = append(ids, id)
		e.commit("shop", id, false)
		e.down.setRefuse(key("shop", id, "email.send"), true)
	}
	e.drain()
	b := e.serve(nil)
	parked := map[string]bool{}
	for _, id := range ids {
		parked[id] = true
	}
	for round := range 5 {
		page := b.get("/parked")
		all := refs(page)
		byID := map[string]string{}
		for _, r := range all {
			q, _ := url.ParseQuery(r)
			byID[q.Get("e")] = r
		}
		if len(byID) != len(parked) {
			t.Fatalf("round %d: %d refs on the page, %d parked", round, len(byID), len(parked))
		}
		var names []string
		var form []string
		for id := range byID {
			if rng.IntN(3) == 0 {
				names = append(names, id)
				form = append(form, byID[id])
				if rng.IntN(3) == 0 {
					form = append(form, byID[id])
				}
			}
		}
		if len(form) == 0 {
			continue
		}
		rng.Shuffle(len(form), func(i, j int) { form[i], form[j] = form[j], form[i] })
		to := []string{"/redrive", "/resolve"}[rng.IntN(2)]
		done := b.post(to, url.Values{"ref": form, "csrf": {csrf(t, page)}, "confirm": {"yes"}, "why": {"round " + strconv.Itoa(round)}})
		if done.Status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", to, done.Status, done.Body)
		}
		mustNotContain(t, done, "<b>no</b>")
		for _, n := range names {
			delete(parked, n)
		}
		for _, id := range ids {
			in := e.claim("shop", id).Intents["email.send"]
			if (in.Status == dedup.IntentParked) != parked[id] {
				t.Fatalf("round %d %s %v: %q is %s, parked=%v", round, to, names, id, in.Status, parked[id])
			}
		}
	}
}
