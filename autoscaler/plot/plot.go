// Package plot draws timelines as self-contained SVG: stacked panels that
// share a time axis, each with step or line series (replicas, a queue's
// depth, a metric against its target).
package plot

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// Point is one sample: At from the start of the timeline.
type Point struct {
	At    time.Duration
	Value float64
}

// Series is one line of a panel.
type Series struct {
	Name   string
	Points []Point
	// Step draws the value as held until the next point (replica counts).
	Step   bool
	Dashed bool
	Color  string
}

// Panel is one chart of the stack.
type Panel struct {
	Title  string
	Series []Series
}

// Chart is a stack of panels over one time axis.
type Chart struct {
	Title  string
	Panels []Panel
}

// Palette is used for series without a color.
var Palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

const (
	width       = 900
	panelHeight = 220
	left        = 70
	right       = 180
	top         = 60
	gap         = 40
)

// WriteSVG renders the chart.
func (c Chart) WriteSVG(w io.Writer) error {
	var end time.Duration
	for _, p := range c.Panels {
		for _, s := range p.Series {
			for _, pt := range s.Points {
				end = max(end, pt.At)
			}
		}
	}
	// Room after the last point, so that its value shows.
	end += end / 20
	if end == 0 {
		end = time.Second
	}
	height := top + len(c.Panels)*(panelHeight+gap) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(c.Title))
	plotW := float64(width - left - right)
	for i, p := range c.Panels {
		y0 := float64(top + i*(panelHeight+gap))
		h := float64(panelHeight)
		lo, hi := bounds(p)
		x := func(d time.Duration) float64 { return left + plotW*float64(d)/float64(end) }
		y := func(v float64) float64 { return y0 + h - h*(v-lo)/(hi-lo) }
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", left, y0-6, html.EscapeString(p.Title))
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", left, y0, plotW, h)
		for _, tick := range ticks(lo, hi, 5) {
			fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
				left, left+plotW, y(tick), y(tick), left-6, y(tick)+4, formatValue(tick))
		}
		for _, tick := range timeTicks(end) {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", x(tick), y0+h+14, tick)
		}
		for j, s := range p.Series {
			color := s.Color
			if color == "" {
				color = Palette[j%len(Palette)]
			}
			dash := ""
			if s.Dashed {
				dash = ` stroke-dasharray="6,4"`
			}
			var path strings.Builder
			for k, pt := range s.Points {
				switch {
				case k == 0:
					fmt.Fprintf(&path, "M%.1f,%.1f", x(pt.At), y(pt.Value))
				case s.Step:
					fmt.Fprintf(&path, " H%.1f V%.1f", x(pt.At), y(pt.Value))
				default:
					fmt.Fprintf(&path, " L%.1f,%.1f", x(pt.At), y(pt.Value))
				}
			}
			if s.Step && len(s.Points) > 0 {
				fmt.Fprintf(&path, " H%.1f", x(end))
			}
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", path.String(), color, dash)
			ly := y0 + 14 + float64(j)*18
			fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s/><text x="%.0f" y="%.0f">%s</text>`+"\n",
				left+plotW+10, left+plotW+30, ly, ly, color, dash, left+plotW+35, ly+4, html.EscapeString(s.Name))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// bounds is the panel's value range, from 0 and with some headroom.
func bounds(p Panel) (float64, float64) {
	lo, hi := 0.0, 1.0
	for _, s := range p.Series {
		for _, pt := range s.Points {
			if math.IsNaN(pt.Value) || math.IsInf(pt.Value, 0) {
				continue
			}
			lo, hi = min(lo, pt.Value), max(hi, pt.Value)
		}
	}
	return lo, hi + (hi-lo)*0.1
}

// ticks returns about n round values between lo and hi.
func ticks(lo, hi float64, n int) []float64 {
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/float64(n))))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(step*m) <= float64(n) {
			step *= m
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		out = append(out, v)
	}
	return out
}

func timeTicks(end time.Duration) []time.Duration {
	step := time.Second
	for _, s := range []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour} {
		if end/step <= 8 {
			break
		}
		step = s
	}
	var out []time.Duration
	for t := time.Duration(0); t <= end; t += step {
		out = append(out, t)
	}
	return out
}

func formatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
