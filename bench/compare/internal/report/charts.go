package report

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series is one named set of values, one per category.
type series struct {
	name   string
	values []float64
}

// barChart saves a grouped bar chart: a group of bars per category, a
// bar per series. Values are divided by scale for the axis (unit says
// what is left).
func barChart(path, title, unit string, categories []string, ss []series, scale float64) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	p.Legend.Top = true
	w := vg.Points(min(40, 240/float64(len(categories)*len(ss))))
	top := 0.0
	for i, s := range ss {
		vs := make(plotter.Values, len(s.values))
		for j, v := range s.values {
			if math.IsNaN(v) {
				v = 0
			}
			vs[j] = v / scale
			top = max(top, vs[j])
		}
		bars, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(len(ss)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.name, bars)
	}
	p.Y.Min, p.Y.Max = 0, top*1.3 // room for the legend
	p.Add(plotter.NewGrid())
	p.NominalX(categories...)
	return p.Save(vg.Length(max(6, 1.6*float64(len(categories))))*vg.Inch, 4*vg.Inch, path)
}

// rangeChart saves the latency chart: per category, a vertical line from
// p50 to the maximum with a mark at p50, p99 and the maximum, on a
// logarithmic axis in milliseconds.
func rangeChart(path, title string, categories []string, p50, p99, pmax []float64) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "milliseconds (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	floor := math.Inf(1)
	for _, v := range p50 {
		if v > 0 {
			floor = min(floor, v)
		}
	}
	if math.IsInf(floor, 1) {
		return fmt.Errorf("chart %s: no positive latency", path)
	}
	clamp := func(v float64) float64 { return max(v, floor/2) } // a log axis has no zero
	top := 0.0
	for _, v := range pmax {
		top = max(top, v)
	}
	for i := range categories {
		x := float64(i)
		line, err := plotter.NewLine(plotter.XYs{{X: x, Y: clamp(p50[i])}, {X: x, Y: clamp(pmax[i])}})
		if err != nil {
			return err
		}
		line.Color = color.Gray{Y: 150}
		line.Width = vg.Points(2)
		p.Add(line)
	}
	marks := []struct {
		name  string
		vs    []float64
		shape draw.GlyphDrawer
	}{
		{"p50", p50, draw.CircleGlyph{}},
		{"p99", p99, draw.TriangleGlyph{}},
		{"max", pmax, draw.BoxGlyph{}},
	}
	for i, m := range marks {
		xys := make(plotter.XYs, len(categories))
		for j := range categories {
			xys[j] = plotter.XY{X: float64(j), Y: clamp(m.vs[j])}
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Shape = m.shape
		sc.GlyphStyle.Radius = vg.Points(4)
		sc.GlyphStyle.Color = plotutil.Color(i)
		p.Add(sc)
		p.Legend.Add(m.name, sc)
	}
	p.Add(plotter.NewGrid())
	p.NominalX(categories...)
	p.X.Min, p.X.Max = -0.5, float64(len(categories))-0.5
	p.Y.Min, p.Y.Max = floor/2, top*4 // room for the legend
	return p.Save(vg.Length(max(6, 1.6*float64(len(categories))))*vg.Inch, 4*vg.Inch, path)
}

// lineChart saves figures against partition counts, on a logarithmic
// x axis, one line per series.
func lineChart(path, title, unit string, xs []float64, ss []series, scale float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "partitions (log scale)"
	p.Y.Label.Text = unit
	p.X.Scale = plot.LogScale{}
	ticks := make([]plot.Tick, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: fmt.Sprint(x)}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = xs[0]/1.5, xs[len(xs)-1]*1.5
	p.Legend.Top = true
	p.Legend.Left = true
	top := 0.0
	for i, s := range ss {
		xys := plotter.XYs{}
		for j, v := range s.values {
			if !math.IsNaN(v) {
				xys = append(xys, plotter.XY{X: xs[j], Y: v / scale})
				top = max(top, v/scale)
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, pts.Color = plotutil.Color(i/2), plotutil.Color(i/2)
		l.Width = vg.Points(2)
		if i%2 == 1 { // the second figure of a client: dashed
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		}
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	p.Y.Min, p.Y.Max = 0, top*1.5 // room for the legend
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}
