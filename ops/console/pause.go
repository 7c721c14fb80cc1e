package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// pauseView is a pause's or a resume's confirmation: what it will do, and the target's pause
// as the table holds it now.
type pauseView struct {
	Resume      bool
	Target, Why string
	By          string        // the console's operator, recorded as who paused
	Now         *outbox.Pause // the target's pause now; nil: not paused
	// Shown names Now in the form (encodePause; empty: not paused): the resume lifts that pause
	// only, the pause replaces it only.
	Shown string
	// Stale says why a confirmed pause or resume wrote nothing: the form named another pause
	// than the target's now, or none. The page then asks again, about the pause as it is now.
	Stale string
}

// encodePause names a pause in a form: its ID, and who, why and when for one written by an
// older release (outbox.Targets.ResumePause), URL-encoded.
func encodePause(p outbox.Pause) string {
	return url.Values{"i": {p.ID}, "b": {p.By}, "w": {p.Why}, "a": {p.At.UTC().Format(time.RFC3339Nano)}}.Encode()
}

func decodePause(v string) (outbox.Pause, bool) {
	q, err := url.ParseQuery(v)
	if err != nil || len(q) != 4 || len(q["i"]) != 1 || len(q["b"]) != 1 || len(q["w"]) != 1 || len(q["a"]) != 1 {
		return outbox.Pause{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, q.Get("a"))
	if err != nil {
		return outbox.Pause{}, false
	}
	return outbox.Pause{ID: q.Get("i"), By: q.Get("b"), Why: q.Get("w"), At: at.UTC()}, true
}

// pauseTarget pauses (POST /pause: target, why) or resumes (POST /resume: target) a target
// through outbox.Targets, with a redrive's guards (actionForm) and confirmation (confirm=yes).
// A pause takes a target of the sources file only (another would pause nothing the deployment
// calls). Both act only on the pause their confirmation showed (the form's pause field; for a
// pause, empty: not paused): otherwise they answer 409 with the confirmation of the pause as
// it is now.
func (c *Console) pauseTarget(w http.ResponseWriter, r *http.Request) error {
	if err := c.actionForm(w, r, 4<<10); err != nil {
		return err
	}
	v := pauseView{Resume: r.URL.Path == "/resume", Target: r.PostFormValue("target"), Why: r.PostFormValue("why"), By: c.cfg.Operator}
	targets := &outbox.Targets{API: c.cfg.DynamoDB, Table: c.cfg.Table, Now: c.cfg.Now}
	// show reads the target's pause as it is now, for the page.
	show := func() error {
		paused, err := targets.Paused(r.Context())
		if err != nil {
			return err
		}
		v.Now, v.Shown = nil, ""
		if p, ok := paused[v.Target]; ok {
			v.Now, v.Shown = &p, encodePause(p)
		}
		return nil
	}
	if err := show(); err != nil {
		return awsErr("reading the paused targets", err)
	}
	if c.src.Targets[v.Target] == nil && !(v.Resume && v.Now != nil) {
		return failure(http.StatusBadRequest, "Not a target", "target "+strconv.Quote(clip(v.Target, 120))+
			" is not in the sources file: the console pauses only a target the deployment calls.")
	}
	if err := dedup.Printable(v.Why, dedup.MaxResolution); err != nil && !v.Resume {
		return failure(http.StatusBadRequest, "Say why", "A pause records why: the reason "+err.Error()+".")
	}
	title, verb := "Pause ", "paused"
	if v.Resume {
		title, verb = "Resume ", "resumed"
	}
	confirm := func(status int) error {
		return c.render(w, r, status, "pause", page{Title: title + v.Target + "?", Nav: "overview", Data: v})
	}
	if r.PostFormValue("confirm") != "yes" {
		return confirm(http.StatusOK)
	}
	// A pause or a resume is the operator's decision about the pause they were shown:
	// conditional on it, so a confirmation sent again later (a stale tab, another operator's
	// old page) replaces or lifts no pause made since.
	var err error
	form := r.PostFormValue("pause")
	shown, ok := decodePause(form)
	switch {
	case !v.Resume && form == "": // shown not paused
		err = targets.PauseIfUnchanged(r.Context(), v.Target, c.cfg.Operator, v.Why, nil)
	case !ok:
		v.Stale = "Not " + verb + ": the form does not say which pause you confirmed."
	case !v.Resume:
		err = targets.PauseIfUnchanged(r.Context(), v.Target, c.cfg.Operator, v.Why, &shown)
	case v.Now == nil:
		v.Stale = "Not resumed: it was resumed already, since you confirmed."
	default:
		err = targets.ResumePause(r.Context(), v.Target, shown)
	}
	if errors.Is(err, outbox.ErrPauseChanged) {
		v.Stale = "Not " + verb + ": the pause you confirmed (by " + shown.By + " at " + shown.At.Format(time.RFC3339) +
			") is not the target's pause any more."
		if form == "" {
			v.Stale = "Not paused: you confirmed it not paused, and it has been paused since."
		}
		err = nil
		_ = show() // should it fail, the page shows the pause as read before
	}
	if v.Stale != "" {
		return confirm(http.StatusConflict)
	}
	if err != nil {
		return awsErr("writing the pause", err)
	}
	return redirect(w, "/#paused")
}
