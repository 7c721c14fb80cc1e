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
	// Shown names Now in the resume's form (encodePause): the resume lifts that pause only.
	Shown string
	// Stale says why a confirmed resume lifted nothing: the form named another pause than the
	// target's now, or none. The page then asks again, about the pause as it is now.
	Stale string
}

// encodePause names a pause in a form: its ID, and who, why and when for one written by an
// older release (outbox.Targets.ResumePause), URL-encoded.
func encodePause(p outbox.Pause) string {
	return url.Values{"i": {p.ID}, "b": {p.By}, "w": {p.Why}, "a": {p.At.UTC().Format(time.RFC3339Nano)}}.Encode()
}

func decodePause(v string) (outbox.Pause, bool) {
	q, err := url.ParseQuery(v)
	if err != nil || v == "" || len(q) != 4 || len(q["i"]) != 1 || len(q["b"]) != 1 || len(q["w"]) != 1 || len(q["a"]) != 1 {
		return outbox.Pause{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, q.Get("a"))
	if err != nil {
		return outbox.Pause{}, false
	}
	return outbox.Pause{ID: q.Get("i"), By: q.Get("b"), Why: q.Get("w"), At: at.UTC()}, true
}

// pauseTarget pauses (POST /pause: target, why) or resumes (POST /resume: target) a target
// through outbox.Targets, the one writer of the pause item, with a redrive's guards
// (actionForm): a form without confirm=yes shows what it will do, one with it does it, the
// pause recorded as done by the console's Operator, and answers with the overview. A pause
// takes a target of the sources file only (another name would pause nothing the deployment
// calls); a resume takes one of it, or one that is paused, and lifts only the pause its
// confirmation showed (the form's pause field, outbox.Targets.ResumePause): otherwise it
// answers 409 with the confirmation of the pause as it is now.
func (c *Console) pauseTarget(w http.ResponseWriter, r *http.Request) {
	if !c.actionForm(w, r, 4<<10) {
		return
	}
	v := pauseView{Resume: r.URL.Path == "/resume", Target: r.PostFormValue("target"), Why: r.PostFormValue("why"), By: c.cfg.Operator}
	targets := &outbox.Targets{API: c.cfg.DynamoDB, Table: c.cfg.Table, Now: c.cfg.Now}
	paused, err := targets.Paused(r.Context())
	if err != nil {
		c.awsFail(w, r, "reading the paused targets", err)
		return
	}
	if p, ok := paused[v.Target]; ok {
		v.Now, v.Shown = &p, encodePause(p)
	}
	if known := c.cfg.Sources != nil && c.cfg.Sources.Targets[v.Target] != nil; !known && !(v.Resume && v.Now != nil) {
		c.fail(w, r, http.StatusBadRequest, "Not a target", "target "+strconv.Quote(clip(v.Target, 120))+
			" is not in the sources file: the console pauses only a target the deployment calls.")
		return
	}
	if err := dedup.Printable(v.Why, dedup.MaxResolution); err != nil && !v.Resume {
		c.fail(w, r, http.StatusBadRequest, "Say why", "A pause records why: the reason "+err.Error()+".")
		return
	}
	confirm := func(status int) {
		title := "Pause " + v.Target + "?"
		if v.Resume {
			title = "Resume " + v.Target + "?"
		}
		c.render(w, r, status, "pause", page{Title: title, Nav: "overview", Data: v})
	}
	if r.PostFormValue("confirm") != "yes" {
		confirm(http.StatusOK)
		return
	}
	if v.Resume {
		// A resume is the operator's decision about the pause they were shown: conditional on
		// it, so a confirmation sent again later (a stale tab, another operator's old page)
		// lifts no pause made since.
		shown, ok := decodePause(r.PostFormValue("pause"))
		switch {
		case !ok:
			v.Stale = "Not resumed: the form does not say which pause you confirmed."
		case v.Now == nil:
			v.Stale = "Not resumed: it was resumed already, since you confirmed."
		default:
			err = targets.ResumePause(r.Context(), v.Target, shown)
			if errors.Is(err, outbox.ErrPauseChanged) {
				v.Stale = "Not resumed: the pause you confirmed (by " + shown.By + " at " + shown.At.Format(time.RFC3339) +
					") is not the target's pause any more."
				if p, rerr := targets.Paused(r.Context()); rerr == nil { // as it is now, for the page
					v.Now, v.Shown = nil, ""
					if p, ok := p[v.Target]; ok {
						v.Now, v.Shown = &p, encodePause(p)
					}
				}
				err = nil
			}
		}
		if v.Stale != "" {
			confirm(http.StatusConflict)
			return
		}
	} else {
		err = targets.Pause(r.Context(), v.Target, c.cfg.Operator, v.Why)
	}
	if err != nil {
		c.awsFail(w, r, "writing the pause", err)
		return
	}
	redirect(w, "/#paused")
}
