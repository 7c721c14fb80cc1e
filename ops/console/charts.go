package console

import (
	"slices"
	"strconv"
)

// The charts are SVG, inline in the page, drawn by the "chart" template (overview.html): no
// script, no library, nothing to fetch. A chart is a set of rows (a source, a target), each a
// stacked horizontal bar of named series, with its numbers written beside it so that it reads
// without hovering.

type series struct {
	Name  string
	Class string // a CSS class of console.css: s0..s3
}

type chartRow struct {
	Label  string
	Values []float64 // one per series of its chart
	// Laid out by Draw: the row's top, and its bar's parts drawn wider than 0.
	Y    int
	Bars []mark
}

type chart struct {
	Title  string
	Series []series
	Rows   []chartRow
	// AtLeast: the read bound cut the counts, each written "≥ N".
	AtLeast bool
	// Laid out by Draw: the drawing's height and the legend's entries.
	Height int
	Legend []mark
}

// A mark is a series' entry in the legend (X), or its part of a row's bar (X, W, Value).
type mark struct {
	series
	X, W, Value float64
}

// The layout in pixels: the labels' column, the longest bar, a row, the legend's band.
const labelW, barW, rowH, chartTop = 140, 300, 26, 34

// Draw lays c out: the legend's entries, each row's place and its bar's parts, scaled to the
// longest bar.
func (c chart) Draw() chart {
	c.Height = chartTop + rowH*max(len(c.Rows), 1) + 8
	x := float64(labelW)
	for _, s := range c.Series {
		c.Legend = append(c.Legend, mark{series: s, X: x})
		x += 14 + 8*float64(len(s.Name)) + 14
	}
	total := 0.0
	for _, r := range c.Rows {
		sum := 0.0
		for _, v := range r.Values {
			sum += v
		}
		total = max(total, sum)
	}
	c.Rows = slices.Clone(c.Rows)
	for i, r := range c.Rows {
		c.Rows[i].Y = chartTop + i*rowH
		x := float64(labelW)
		for j, v := range r.Values {
			w := 0.0
			if total > 0 {
				w = v / total * barW
			}
			if w > 0 {
				c.Rows[i].Bars = append(c.Rows[i].Bars, mark{series: c.Series[j], X: x, W: w, Value: v})
			}
			x += w
		}
	}
	return c
}

func num(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}
