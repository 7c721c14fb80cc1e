package console

import (
	"net/http"
	"strconv"

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
}

// pauseTarget pauses (POST /pause: target, why) or resumes (POST /resume: target) a target
// through outbox.Targets, the one writer of the pause item, with a redrive's guards
// (actionForm): a form without confirm=yes shows what it will do, one with it does it, the
// pause recorded as done by the console's Operator, and answers with the overview. A pause
// takes a target of the sources file only (another name would pause nothing the deployment
// calls); a resume takes one of it, or one that is paused.
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
		v.Now = &p
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
	if r.PostFormValue("confirm") != "yes" {
		title := "Pause " + v.Target + "?"
		if v.Resume {
			title = "Resume " + v.Target + "?"
		}
		c.render(w, r, http.StatusOK, "pause", page{Title: title, Nav: "overview", Data: v})
		return
	}
	if v.Resume {
		err = targets.Resume(r.Context(), v.Target)
	} else {
		err = targets.Pause(r.Context(), v.Target, c.cfg.Operator, v.Why)
	}
	if err != nil {
		c.awsFail(w, r, "writing the pause", err)
		return
	}
	redirect(w, "/#paused")
}
