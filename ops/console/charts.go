package console

import (
	"fmt"
	"html"
	"html/template"
	"strconv"
	"strings"
)

// The charts are SVG written here, inline in the page: no script, no library, nothing to
// fetch. A chart is a set of rows (a source, a target), each a stacked horizontal bar of
// named series, with its numbers written beside it so that it reads without hovering.

type series struct {
	Name  string
	Class string // a CSS class of console.css: s0..s3
}

type chartRow struct {
	Label  string
	Values []float64 // one per series of its chart
}

type chart struct {
	Title  string
	Series []series
	Rows   []chartRow
	// AtLeast: the read bound cut the counts, each written "≥ N".
	AtLeast bool
}

// SVG renders c. Every text is escaped; the chart's own markup is all it contains.
func (c chart) SVG() template.HTML {
	const width, labelW, barW, rowH, top = 640, 140, 300, 26, 34
	total := 0.0
	for _, r := range c.Rows {
		sum := 0.0
		for _, v := range r.Values {
			sum += v
		}
		total = max(total, sum)
	}
	height := top + rowH*max(len(c.Rows), 1) + 8
	atLeast := ""
	if c.AtLeast {
		atLeast = "≥ "
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" role="img" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d"><title>%s</title>`,
		width, height, width, height, html.EscapeString(c.Title))
	x := float64(labelW)
	for _, s := range c.Series { // the legend
		fmt.Fprintf(&b, `<rect class="%s" x="%.0f" y="6" width="10" height="10"/><text class="legend" x="%.0f" y="15">%s</text>`,
			s.Class, x, x+14, html.EscapeString(s.Name))
		x += 14 + 8*float64(len(s.Name)) + 14
	}
	if len(c.Rows) == 0 {
		fmt.Fprintf(&b, `<text class="label" x="0" y="%d">nothing to show</text>`, top+16)
	}
	for i, r := range c.Rows {
		y := top + i*rowH
		fmt.Fprintf(&b, `<g class="row" data-label="%s"><text class="label" x="0" y="%d">%s</text>`, html.EscapeString(r.Label), y+15, html.EscapeString(clip(r.Label, 18)))
		x := float64(labelW)
		var nums []string
		for j, v := range r.Values {
			w := 0.0
			if total > 0 {
				w = v / total * barW
			}
			if s := c.Series[j]; w > 0 {
				fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%d" width="%.1f" height="18"><title>%s %s</title></rect>`, s.Class, x, y+2, w, html.EscapeString(s.Name), num(v))
			}
			x += w
			nums = append(nums, atLeast+num(v))
		}
		fmt.Fprintf(&b, `<text class="value" x="%d" y="%d">%s</text></g>`, labelW+barW+10, y+15, html.EscapeString(strings.Join(nums, " / ")))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func num(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}
